/**
 * `ticketing lock --no-keep-alive --lease S` beyond the server's 250 s per
 * lease: the lock is extended, a third of each lease at a time, until S is
 * up and no further (time scaled down: a "server lease" of 600 ms here).
 */
import { describe, expect, it } from 'vitest';
import { extendUntil } from '../src/lock-command.js';

class FakeTicket {
  private end: number;
  readonly extensions: Array<{ at: number; leaseMs: number }> = [];
  private readonly controller = new AbortController();
  constructor(leaseMs: number, private readonly answer: () => 'X' | 'G' = () => 'X') {
    this.end = performance.now() + leaseMs;
  }
  get signal(): AbortSignal {
    return this.controller.signal;
  }
  remainingMs(): number {
    return Math.max(0, this.end - performance.now());
  }
  async extend(leaseMs: number): Promise<number> {
    await Promise.resolve(); // an answer comes later than the call
    this.extensions.push({ at: performance.now(), leaseMs });
    if (this.answer() === 'G') {
      this.controller.abort(new Error('lease ended'));
      throw new Error('gone');
    }
    this.end = performance.now() + Math.ceil(leaseMs / 100) * 100; // the client rounds up (seconds there)
    return this.remainingMs();
  }
}

describe('extendUntil', () => {
  it('extends at a third of each lease until the limit, the last extension only as long as what is left', async () => {
    const wire = 600;
    const ticket = new FakeTicket(wire);
    const start = performance.now();
    const limitAt = start + 1_500;
    await extendUntil(ticket, limitAt, wire, new AbortController().signal);
    expect(ticket.remainingMs()).toBeGreaterThan(0);
    expect(performance.now() + ticket.remainingMs()).toBeGreaterThanOrEqual(limitAt);
    expect(performance.now() + ticket.remainingMs()).toBeLessThanOrEqual(limitAt + 100);
    const { extensions } = ticket;
    expect(extensions.length).toBeGreaterThanOrEqual(2);
    expect(extensions[0]!.at - start).toBeGreaterThanOrEqual(150); // not before a third of the lease
    expect(extensions.at(-1)!.leaseMs).toBeLessThan(wire);
    for (const e of extensions.slice(0, -1)) expect(e.leaseMs).toBe(wire);
  });

  it('stops at once when the grant is gone, or when told to', async () => {
    const gone = new FakeTicket(300, () => 'G');
    await extendUntil(gone, performance.now() + 5_000, 300, new AbortController().signal);
    expect(gone.extensions).toHaveLength(1);
    const stop = new AbortController();
    const told = new FakeTicket(300);
    setTimeout(() => stop.abort(), 50);
    await extendUntil(told, performance.now() + 5_000, 300, stop.signal);
    expect(told.extensions).toHaveLength(0);
  });
});
