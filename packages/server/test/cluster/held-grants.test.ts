/**
 * Issue 26, defect 8: with sync-standbys, a grant whose reply waits for the
 * standbys' acknowledgements past its hold deadline is answered T and
 * released, never delivered after its lease (ReplyQueue.expireHeld); replies
 * of one key keep their order.
 */
import { describe, expect, it } from 'vitest';
import { Waiter, type WaiterOwner } from '../../src/engine/waiter.js';
import { ReplyQueue } from '../../src/session/reply-queue.js';

const owner: WaiterOwner = { granted: () => true, timedOut() {} };

function held() {
  const written: string[] = [];
  const released: string[] = [];
  const gate = { index: 1 as number | undefined, commit: 0 };
  const q = new ReplyQueue((t) => written.push(t), {
    holding: () => gate.index !== undefined,
    gateIndex: () => gate.index,
    committedIndex: () => gate.commit,
    awaitCommit() {},
  });
  const release = (key: string, token: bigint) => released.push(`${key} ${token}`);
  return { q, written, released, gate, release };
}

describe('held grants under sync-standbys (defect 8)', () => {
  it('answers a held grant T at its deadline and releases it; the rest of its batch still waits for the standbys', () => {
    const { q, written, released, gate, release } = held();
    q.push('P\n');
    q.answered('k', 'A', 5n, 1_000);
    q.answered('j', 'A', 6n, 5_000);
    q.flush();
    expect(written).toEqual([]);
    q.expireHeld(999, release);
    expect(written).toEqual([]);
    q.expireHeld(1_000, release);
    expect(written).toEqual(['T k\n']);
    expect(released).toEqual(['k 5']);
    // The standby acknowledges at last: the rest goes out, without the grant already answered.
    gate.commit = 1;
    q.releaseCommitted();
    expect(written).toEqual(['T k\n', 'P\nA 6 j\n']);
  });

  it('keeps replies of one key in order: a later grant waits while an earlier reply of its key is held', () => {
    const { q, written, released, release } = held();
    q.answered('k', 'A', 5n, 9_000);
    q.flush();
    q.answered('k', 'A', 7n, 1_000); // a second acquire of k, granted after a release, with a shorter wait
    q.flush();
    q.expireHeld(2_000, release);
    expect(written).toEqual([]);
    q.expireHeld(9_000, release);
    expect(written).toEqual(['T k\nT k\n']);
    expect(released).toEqual(['k 5', 'k 7']);
  });

  it('a grant decided for a queued acquire carries its deadline too; a connection that closes releases only what was not answered', () => {
    const { q, written, released, release } = held();
    const w = new Waiter(owner, 'q', 1000, 0, undefined);
    const slot = q.queued('q', w, 3_000);
    expect(slot.waitEnd).toBe(3_000);
    q.decide(slot, 'A', 9n, 3_000);
    q.answered('r', 'A', 10n, 99_000);
    q.flush();
    q.expireHeld(3_000, release);
    expect(written).toEqual(['T q\n']);
    q.abandon(release);
    expect(released).toEqual(['q 9', 'r 10']);
  });

  it('sends held T and B replies at once, unless an earlier grant of their key is still held', () => {
    const { q, written, release } = held();
    q.answered('k', 'T', 0n);
    q.answered('j', 'A', 6n, 5_000);
    q.flush();
    q.answered('j', 'B', 0n);
    q.answered('i', 'B', 0n);
    q.flush();
    q.expireHeld(1, release);
    // k's T and i's B go out; j's B waits behind j's grant.
    expect(written).toEqual(['T k\nB i\n']);
    q.expireHeld(5_000, release);
    expect(written).toEqual(['T k\nB i\n', 'T j\nB j\n']);
  });

  it('never expires grants without a deadline (Raft: a leader that cannot commit steps down instead)', () => {
    const { q, written, released, release } = held();
    q.answered('k', 'A', 5n);
    q.flush();
    q.expireHeld(Number.MAX_SAFE_INTEGER, release);
    expect(written).toEqual([]);
    expect(released).toEqual([]);
  });
});
