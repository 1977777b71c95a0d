/**
 * The recorder against scripted servers: what it records for each kind of
 * reply, how it matches pipelined replies, follows redirects, and turns every
 * lost reply into `unknown` without ever retrying.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { HistoryRecorder, type Operation } from '../src/index.js';
import { FakeServer, greeting, type Script } from '@ticketing/test-support';

const servers: FakeServer[] = [];
let recorder: HistoryRecorder | undefined;
afterEach(async () => {
  recorder?.close();
  recorder = undefined;
  await Promise.all(servers.splice(0).map(async (s) => s.close()));
});

async function serve(script: Script): Promise<FakeServer> {
  // FIN is answered with FIN, as the real server does.
  const s = await FakeServer.start(script, { allowHalfOpen: false });
  servers.push(s);
  return s;
}

function record(addresses: string[], options: { clientToken?: string; replyGraceMs?: number } = {}): HistoryRecorder {
  recorder = new HistoryRecorder({ addresses, ...options });
  return recorder;
}

const completedIn = (op: Operation | undefined) => (op?.completedAt === undefined ? undefined : op.completedAt - op.invokedAt);

describe('HistoryRecorder', () => {
  it('records each reply as its outcome, with the time it arrived', async () => {
    const replies: Record<string, string> = { 'A g 0 1': 'A 17 g', 'A t 0 1': 'T t', 'A b 0 1': 'B b', 'R g 17': 'R g', 'R g 99': 'N g' };
    const s = await serve(greeting((conn, line) => conn.send(replies[line]!)));
    const c = record([s.address]).client('alice');
    expect(await c.acquire('g', 0, 1)).toMatchObject({ client: 'alice', op: 'acquire', key: 'g', waitMs: 0, leaseMs: 1000, outcome: 'granted', token: 17n });
    expect(await c.acquire('t', 0, 1)).toMatchObject({ outcome: 'timeout' });
    expect(await c.acquire('b', 0, 1)).toMatchObject({ outcome: 'busy' });
    expect(await c.release('g', 17n)).toMatchObject({ op: 'release', key: 'g', token: 17n, outcome: 'released' });
    expect(await c.release('g', 99n)).toMatchObject({ outcome: 'not-held' });
    const history = recorder!.history();
    expect(history.map((o) => o.outcome)).toEqual(['granted', 'timeout', 'busy', 'released', 'not-held']);
    for (const op of history) expect(completedIn(op)).toBeGreaterThanOrEqual(0);
    expect(s.received[0]!.line).toBe('H 1');
  });

  it('records extensions: X as extended, G as not extended, a lost reply as unknown (never retried)', async () => {
    const replies: Record<string, string> = { 'X g 17 3': 'X g', 'X g 99 2': 'G g' };
    const s = await serve(greeting((conn, line) => (line === 'X lost 5 1' ? conn.destroy() : conn.send(replies[line]!))));
    const c = record([s.address]).client('bob');
    expect(await c.extend('g', 17n, 3)).toMatchObject({ client: 'bob', op: 'extend', key: 'g', token: 17n, leaseMs: 3000, outcome: 'extended' });
    expect(await c.extend('g', 99n, 2)).toMatchObject({ outcome: 'not-extended' });
    expect(await c.extend('lost', 5n, 1)).toMatchObject({ outcome: 'unknown', completedAt: undefined });
    expect(s.requests().filter((l) => l.startsWith('X lost'))).toHaveLength(1);
    await expect(c.extend('g', 17n, 0)).rejects.toThrow(RangeError);
  });

  it('pipelines requests and matches replies by op and key, oldest first', async () => {
    const s = await serve(
      greeting((conn) => {
        // Answer only once all four requests are in, in an order of its own.
        if (s.requests().length === 4) for (const reply of ['T k2', 'N k1', 'A 5 k1', 'T k1']) conn.send(reply);
      }),
    );
    const c = record([s.address]).client();
    const ops = await Promise.all([c.acquire('k1', 1, 1), c.acquire('k2', 0, 1), c.release('k1', 3n), c.acquire('k1', 0, 1)]);
    expect(ops.map((o) => (o?.outcome === 'granted' ? `granted ${o.token}` : o?.outcome))).toEqual(['granted 5', 'timeout', 'not-held', 'timeout']);
    expect(s.connectionCount()).toBe(1);
  });

  it('follows M to the active node and greets it with the client token', async () => {
    const active = await serve((conn, line) => conn.send(line.startsWith('H ') ? 'H 1 active' : 'A 9 k'));
    const standby = await serve((conn) => conn.send(`M ${active.address}`));
    const c = record([standby.address], { clientToken: 'sekret' }).client();
    expect(await c.acquire('k', 0, 1)).toMatchObject({ outcome: 'granted', token: 9n });
    expect(standby.received.map((r) => r.line)).toEqual(['H 1 sekret']);
    expect(active.received.map((r) => r.line)).toEqual(['H 1 sekret', 'A k 0 1']);
  });

  it('records nothing when no node serves (M -, E auth), and says why', async () => {
    const noActive = await serve((conn) => conn.send('M -'));
    const refusing = await serve((conn) => conn.send('E auth bad client token'));
    const c = record([noActive.address, refusing.address]).client();
    expect(await c.connect()).toBe(false);
    expect(await c.acquire('k', 0, 1)).toBeUndefined();
    expect(recorder!.history()).toEqual([]);
    expect(c.lastConnectError).toMatch(/E auth bad client token/);
  });

  it('makes every pending operation unknown when the connection breaks, and never retries them', async () => {
    const s = await serve(
      greeting((conn, line) => {
        if (conn.id === 0 && s.requests().length === 2) conn.destroy();
        else if (conn.id > 0) conn.send(`A 7 ${line.split(' ')[1]}`);
      }),
    );
    const c = record([s.address]).client();
    const lost = await Promise.all([c.acquire('a', 0, 1), c.release('b', 4n)]);
    expect(lost.map((o) => o?.outcome)).toEqual(['unknown', 'unknown']);
    expect(lost.map((o) => o?.completedAt)).toEqual([undefined, undefined]);
    // The next operation opens a new connection; the lost ones are not sent again.
    expect(await c.acquire('c', 0, 1)).toMatchObject({ outcome: 'granted' });
    expect(s.requests()).toEqual(['A a 0 1', 'R b 4', 'A c 0 1']);
    expect(s.connectionCount()).toBe(2);
  });

  it('gives up on a reply after wait + grace: unknown, and that connection is closed', async () => {
    const s = await serve(greeting(() => {}));
    const c = record([s.address], { replyGraceMs: 150 }).client();
    const t0 = performance.now();
    const op = await c.acquire('k', 0, 1);
    expect(op).toMatchObject({ outcome: 'unknown', completedAt: undefined });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(140);
    expect(performance.now() - t0).toBeLessThan(2000);
    await c.acquire('k', 0, 1);
    expect(s.connectionCount()).toBe(2);
  });

  it('ends the connection on E, on M mid-session and on a reply that matches no request', async () => {
    for (const bad of ['E internal oops', 'M 127.0.0.1:1', 'R k']) {
      const s = await serve(greeting((conn) => conn.send(bad)));
      const c = record([s.address]).client();
      expect(await c.acquire('k', 0, 1)).toMatchObject({ outcome: 'unknown' });
    }
  });

  it('records a T that comes long before the wait ran out as a timeout, with its real time', async () => {
    const s = await serve(greeting((conn, line) => conn.send(`T ${line.split(' ')[1]}`)));
    const op = await record([s.address]).client().acquire('k', 5, 1);
    expect(op).toMatchObject({ outcome: 'timeout', waitMs: 5000 });
    expect(completedIn(op)).toBeLessThan(1000);
  });

  it('keeps operations still pending as unknown in the history', async () => {
    const s = await serve(greeting(() => {}));
    const r = record([s.address]);
    const pending = r.client().acquire('k', 0, 1);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(r.history()).toMatchObject([{ key: 'k', outcome: 'unknown', completedAt: undefined }]);
    r.close();
    expect(await pending).toMatchObject({ outcome: 'unknown' });
  });

  it('rejects arguments the protocol cannot carry before sending anything', async () => {
    const s = await serve(greeting(() => {}));
    const c = record([s.address]).client();
    await expect(c.acquire('bad key', 0, 1)).rejects.toThrow(RangeError);
    await expect(c.acquire('k', 256, 1)).rejects.toThrow('wait must be 0..255 seconds');
    await expect(c.acquire('k', 0, 0)).rejects.toThrow('lease must be 1..250 seconds');
    expect(s.requests()).toEqual([]);
  });
});
