/**
 * The reply queue on its own, no socket: per-key acquire order, batching,
 * the Raft commit gate, and the grants it hands back when a connection dies.
 */
import { describe, expect, it } from 'vitest';
import { Waiter, type WaiterOwner } from '../src/engine/waiter.js';
import { ReplyQueue } from '../src/session/reply-queue.js';

const owner: WaiterOwner = { granted: () => true, timedOut() {} };

function setup() {
  const written: string[] = [];
  const gate = { index: undefined as number | undefined, commit: 0, waits: 0 };
  const q = new ReplyQueue((t) => written.push(t), {
    holding: () => gate.index !== undefined,
    gateIndex: () => gate.index,
    committedIndex: () => gate.commit,
    awaitCommit: () => void gate.waits++,
  });
  return { q, written, gate, waiter: (key: string) => new Waiter(owner, key, 1000, 0, undefined) };
}

describe('ReplyQueue', () => {
  it('gathers a batch into one write', () => {
    const { q, written } = setup();
    q.push('P\n');
    q.answered('k', 'A', 5n);
    q.answered('j', 'T', 0n);
    q.flush();
    q.flush(); // nothing new: no empty write
    expect(written).toEqual(['P\nA 5 k\nT j\n']);
  });

  it('keeps acquire replies of one key in request order, other keys passing by', () => {
    const { q, written, waiter } = setup();
    const w = waiter('k');
    const slot = q.queued('k', w);
    q.answered('k', 'B', 0n); // behind the queued acquire
    q.answered('j', 'A', 9n); // another key: not held back
    q.flush();
    expect(written).toEqual(['A 9 j\n']);
    expect(q.unanswered).toBe(2);
    q.decide(slot, 'A', 7n);
    q.flush();
    expect(written).toEqual(['A 9 j\n', 'A 7 k\nB k\n']);
    expect(q.unanswered).toBe(0);
  });

  it('dropping waiters cancels them and lets the decided replies behind them out', () => {
    const { q, written, waiter } = setup();
    const w = waiter('k');
    q.queued('k', w);
    q.answered('k', 'T', 0n);
    const cancelled: Waiter[] = [];
    q.dropWaiters((x) => cancelled.push(x));
    q.flush();
    expect(cancelled).toEqual([w]);
    expect(written).toEqual(['T k\n']);
    expect(q.unanswered).toBe(0);
  });

  it('holds batches until their log index commits, and drops the uncommitted ones on step-down', () => {
    const { q, written, gate } = setup();
    gate.index = 3;
    q.answered('a', 'A', 1n);
    q.flush();
    gate.index = 4;
    q.answered('b', 'A', 2n);
    q.flush();
    expect(written).toEqual([]);
    expect(gate.waits).toBe(2);
    gate.commit = 3;
    q.releaseCommitted();
    expect(written).toEqual(['A 1 a\n']);
    q.dropUncommitted();
    expect(written).toEqual(['A 1 a\n']);
    expect(q.hasGated).toBe(false);
  });

  it('counts a reply decided on uncommitted state but held behind a queued acquire as dropped on step-down (seed 208212)', () => {
    const { q, gate, waiter } = setup();
    gate.index = 5; // the T below observed the table at log index 5, not yet committed
    gate.commit = 3;
    q.queued('k', waiter('k'));
    q.answered('k', 'T', 0n); // held behind the queued acquire: nothing is gated yet
    q.flush();
    expect(q.hasGated).toBe(false);
    expect(q.dropUncommitted()).toBe(true);
  });

  it('lets a held-back reply whose state committed survive a step-down', () => {
    const { q, gate, waiter } = setup();
    gate.index = 3;
    gate.commit = 3;
    q.queued('k', waiter('k'));
    q.answered('k', 'T', 0n);
    expect(q.dropUncommitted()).toBe(false);
  });

  it('hands back every grant whose reply never left when the connection is abandoned', () => {
    const { q, gate, waiter } = setup();
    gate.index = 1;
    q.answered('gated', 'A', 1n);
    q.flush(); // waits for index 1
    const slot = q.queued('k', waiter('k'));
    q.answered('k', 'A', 3n); // held behind the queued acquire
    q.decide(slot, 'T', 0n); // ... which timed out: both now in `out`, not flushed
    const held = q.queued('h', waiter('h'));
    q.answered('h', 'A', 4n); // behind a waiter still queued
    void held;
    const released: Array<[string, bigint]> = [];
    q.abandon((key, token) => released.push([key, token]));
    expect(released.sort()).toEqual([['gated', 1n], ['h', 4n], ['k', 3n]]);
  });
});
