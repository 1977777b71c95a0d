/**
 * Random bytes from many connections: every bad connection gets E and is
 * closed, the server keeps serving, and no lock changes.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningServer, startServer, tokenOf, Wire } from '@ticketing/test-support';

describe('random input', () => {
  let server: RunningServer;
  const held = new Map<string, bigint>();

  beforeAll(async () => {
    server = await startServer(['--max-conns', '1000']);
    const w = await Wire.open(server.port);
    for (let i = 0; i < 20; i++) held.set(`held-${i}`, tokenOf(await w.ask(`A held-${i} 0 250`)));
    w.destroy();
  });
  afterAll(async () => {
    await server.stop();
  });

  it('closes every connection that sends garbage with E, and changes no lock', async () => {
    // The first byte is never a valid op, so the first line is always bad.
    const payload = fc.tuple(
      fc.integer({ min: 0, max: 255 }).filter((b) => ![0x41, 0x52, 0x50, 0x48].includes(b)),
      fc.uint8Array({ minLength: 0, maxLength: 2_000 }),
    );
    const samples = fc.sample(payload, { numRuns: 600, seed: 42 });
    let closedWithE = 0;
    for (let batch = 0; batch < samples.length; batch += 60) {
      const results = await Promise.all(
        samples.slice(batch, batch + 60).map(async ([first, rest]) => {
          const w = await Wire.open(server.port);
          w.send(Buffer.concat([Buffer.from([first]), rest, Buffer.from('\n')]));
          const reply = await w.line(5_000).catch(() => '');
          const closed = await w.closedWithin(5_000);
          w.destroy();
          return reply.startsWith('E ') && closed;
        }),
      );
      closedWithE += results.filter(Boolean).length;
    }
    expect(closedWithE).toBe(samples.length);
    // Still serving, and every lock is held exactly as before.
    const w = await Wire.open(server.port);
    expect(await w.ask('P')).toBe('P');
    for (const [key, token] of held) {
      expect(await w.ask(`A ${key} 0 1`)).toBe(`T ${key}`);
      expect(await w.ask(`R ${key} ${token}`)).toBe(`R ${key}`);
    }
    expect(server.proc.exitCode).toBeNull();
  });
});
