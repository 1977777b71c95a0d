/**
 * Issue 14, finding 6: a listening server's accept failure (EMFILE: out of
 * file descriptors) is an 'error' event on the server; without a listener it
 * stops the process. Every listener the transport starts has one, and the
 * client listener's guard sheds new connections for a moment, logs once, and
 * takes connections again.
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { AcceptGuard, SHED_MS } from '../src/net/accept-guard.js';
import { ManualClock } from '../src/seams/clock.js';
import { netTransport } from '../src/seams/net-transport.js';

const emfile = () => Object.assign(new Error('accept EMFILE'), { code: 'EMFILE', syscall: 'accept' });

describe('accept failures (issue 14, finding 6)', () => {
  it("a listening server's 'error' after it started reaches onError instead of stopping the process", async () => {
    const seen: Error[] = [];
    for (const onError of [(err: Error) => seen.push(err), undefined]) {
      const listener = await netTransport.listen({ host: '127.0.0.1', port: 0, ...(onError === undefined ? {} : { onError }) }, (s) => s.destroy());
      const server = (listener as unknown as { server: import('node:net').Server }).server;
      expect(() => server.emit('error', emfile())).not.toThrow();
      await listener.close();
    }
    expect(seen.map((e) => (e as NodeJS.ErrnoException).code)).toEqual(['EMFILE']);
  });

  it('sheds new connections for a moment after EMFILE, logs once, then admits again; counts per address', () => {
    const clock = new ManualClock();
    const lines: string[] = [];
    const logger = pino({ level: 'error' }, { write: (l: string) => lines.push(l) });
    const guard = new AcceptGuard({ maxConns: () => 3, maxPerAddress: () => 2 }, clock, logger, 'client');
    const a1 = guard.admit('10.0.0.1')!;
    guard.admit('10.0.0.1');
    guard.admit('10.0.0.1'); // over the per-address limit: admitted (counted) to be told so
    expect(guard.refusal('10.0.0.1')).toBe('too many connections from this address');
    expect(guard.refusal('10.0.0.2')).toBeUndefined();
    guard.admit('10.0.0.2');
    expect(guard.refusal('10.0.0.2')).toBe('too many connections; try later or another node');
    guard.admit('10.0.0.1'); // four from one address = twice its limit: refused outright from now on
    expect(guard.admit('10.0.0.1')).toBeUndefined();
    a1();
    a1(); // a second release of the same connection changes nothing
    expect(guard.open).toBe(4);

    guard.onError(emfile());
    guard.onError(emfile());
    expect(lines.filter((l) => l.includes('out of file descriptors'))).toHaveLength(1);
    expect(guard.admit('10.0.0.3')).toBeUndefined();
    clock.advance(SHED_MS + 1);
    expect(guard.admit('10.0.0.3')).toBeDefined();
    expect(guard.acceptErrors).toBe(2);
  });
});
