/** The active's replication source: which acknowledgements release a reply under sync-standbys. */
import { describe, expect, it } from 'vitest';
import { ReplicationSource } from '../src/cluster/replication-source.js';
import { LeasedRecord } from '../src/engine/lock-engine.js';
import { ManualClock } from '../src/seams/clock.js';
import { LockTable } from '../src/state-machine/lock-table.js';

describe('ReplicationSource.confirmedBy', () => {
  it('counts the acknowledgements of the standbys that would take over first, not of any N', () => {
    const clock = new ManualClock();
    const table = new LockTable<LeasedRecord>(1n, (key, token, leaseMs) => new LeasedRecord(key, token, leaseMs, clock.now() + leaseMs));
    const source = new ReplicationSource(table, { send: () => true, flushNow: () => {} }, clock, 1n);
    const rank = (peer: string) => ({ b: 1, c: 2 })[peer as 'b' | 'c'];
    source.follow('b');
    source.follow('c');
    clock.runSoon();
    source.apply({ type: 'grant', key: 'k', leaseMs: 1_000 });
    source.apply({ type: 'grant', key: 'l', leaseMs: 1_000 });
    // c (second in line) has everything, b (first in line) nothing yet: not confirmed by "the first 1".
    source.ack('c', 2);
    expect(source.confirmedBy(1, rank)).toBe(-1);
    source.ack('b', 1);
    expect(source.confirmedBy(1, rank)).toBe(1);
    expect(source.confirmedBy(2, rank)).toBe(1);
    source.ack('b', 2);
    expect(source.confirmedBy(2, rank)).toBe(2);
    // b gone: c is first in line now.
    source.unfollow('b');
    expect(source.confirmedBy(1, rank)).toBe(2);
    expect(source.confirmedBy(2, rank)).toBe(-1);
  });
});
