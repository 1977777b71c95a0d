import { describe, expect, it } from 'vitest';
import { LockEngine } from '../../src/engine/lock-engine.js';
import { ManualClock } from '../../src/seams/clock.js';
import { encodeCommand } from '../../src/state-machine/command-codec.js';
import { AppliedState } from '../../src/raft/applied-state.js';
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
});
