import { describe, expect, it } from 'vitest';
import { LockEngine } from '../../src/engine/lock-engine.js';
import { ManualClock } from '../../src/seams/clock.js';
import { encodeCommand } from '../../src/state-machine/command-codec.js';
import { AppliedState } from '../../src/raft/applied-state.js';
import type { RaftCore } from '../../src/raft/raft-core.js';
import { SpeculativeLog } from '../../src/raft/speculative-log.js';
import type { Entry } from '../../src/raft/types.js';

const limits = { maxLocks: 100, maxWaitersPerKey: 100, maxWaiters: 100 };

describe('AppliedState', () => {
  it('keeps a lock deadline when a leader steps down and rebuilds its committed table (issue 12, defect 9)', () => {
    const clock = new ManualClock(1_000_000);
    const engine = new LockEngine(clock, limits);
    const state = new AppliedState(engine.records, undefined);
    // As leader: the grant applies at once (speculatively), then commits as entry 1.
    const result = state.table.apply({ type: 'grant', key: 'k', leaseMs: 30_000 });
    expect(result.type).toBe('granted');
    const due = state.table.get('k')!.due;
    const log: Entry[] = [{ index: 1, term: 1, command: encodeCommand({ type: 'grant', key: 'k', leaseMs: 30_000 }) }];
    state.applyCommitted(log, 1);
    clock.advance(20_000);
    state.rebuild((from, to) => log.filter((e) => e.index >= from && e.index <= to));
    // Not a fresh 30 s from now: the lease still ends where it did.
    expect(state.table.get('k')!.due).toBe(due);
  });

  it('drops on step-down what never committed, and rebuilds what did', () => {
    const clock = new ManualClock(1_000_000);
    const engine = new LockEngine(clock, limits);
    const state = new AppliedState(engine.records, undefined);
    state.table.apply({ type: 'grant', key: 'a', leaseMs: 1_000 });
    state.table.apply({ type: 'grant', key: 'b', leaseMs: 1_000 });
    const log: Entry[] = [{ index: 1, term: 1, command: encodeCommand({ type: 'grant', key: 'a', leaseMs: 1_000 }) }];
    state.applyCommitted(log, 2);
    state.rebuild((from, to) => log.filter((e) => e.index >= from && e.index <= to));
    expect(state.table.get('a')).toBeDefined();
    expect(state.table.get('b')).toBeUndefined();
  });

  it('keeps the deadline of a lock the leader expired or released when that did not commit before it stepped down (issue 27, D-6)', () => {
    const clock = new ManualClock(1_000_000);
    const engine = new LockEngine(clock, limits);
    const state = new AppliedState(engine.records, undefined);
    const log: Entry[] = [
      { index: 1, term: 1, command: encodeCommand({ type: 'grant', key: 'k', leaseMs: 30_000 }) },
      { index: 2, term: 1, command: encodeCommand({ type: 'grant', key: 'j', leaseMs: 30_000 }) },
    ];
    state.applyCommitted(log, 0);
    const dueK = state.table.get('k')!.due;
    const dueJ = state.table.get('j')!.due;
    // Leading: its speculative log expires k (the lease ran out) and releases j; neither commits.
    let last = 2;
    const core = { get lastIndex() { return last; }, propose: (c: string[]) => (last += c.length) } as unknown as RaftCore;
    const spec = new SpeculativeLog(state.table, core, clock, () => {}, state);
    clock.advance(30_000);
    spec.apply({ type: 'expire', key: 'k', token: state.table.get('k')!.token });
    spec.apply({ type: 'release', key: 'j', token: state.table.get('j')!.token });
    spec.proposeNow();
    state.rebuild((from, to) => log.filter((e) => e.index >= from && e.index <= to));
    // Both are held again (nothing committed their end), with the deadlines they had: k's lease is
    // over, not a fresh 30 s from the step-down.
    expect(state.table.get('k')!.due).toBe(dueK);
    expect(state.table.get('j')!.due).toBe(dueJ);
  });
});
