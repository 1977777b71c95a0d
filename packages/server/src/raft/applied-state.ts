/**
 * A Raft node's lock table and how far it has applied the log: restored
 * from the last snapshot, then every committed entry in order. The leader's
 * table runs ahead of the commit (it applies what it proposes, see
 * speculative-log.ts); when it stops leading, the table is rebuilt from the
 * snapshot and the committed entries only, dropping what may never commit.
 *
 * Records come from the engine's record factory, so each node's lease
 * deadlines start at its own apply time: never earlier than the leader's.
 */
import type { LeasedRecord } from '../engine/lock-engine.js';
import { decodeCommand } from '../state-machine/command-codec.js';
import { LockTable, type RecordFactory } from '../state-machine/lock-table.js';
import { isConfigurationCommand } from './configuration.js';
import type { StoredSnapshot } from './raft-storage.js';
import type { Entry } from './types.js';

/** Entries `from..to` (inclusive) of the log. */
export type LogSlice = (from: number, to: number) => readonly Entry[];

export class AppliedState {
  /** The lock table: committed state, or (leader) ahead of it by what it proposed. */
  table: LockTable<LeasedRecord>;
  /** The last log index applied to `table` as committed. */
  applied: number;
  /**
   * Leader: locks its table released or expired by entries not committed
   * yet, with their deadlines and those entries' indexes, oldest first. A
   * step-down puts such a lock back (nothing committed its end) and must
   * give it the deadline it had, not a fresh lease.
   */
  private endedUncommitted: Array<{ readonly index: number; readonly token: bigint; readonly due: number }> = [];

  constructor(
    private readonly records: RecordFactory<LeasedRecord>,
    /** The newest snapshot on disk (undefined: none yet). */
    public snapshot: StoredSnapshot | undefined,
  ) {
    this.table = this.restore();
    this.applied = snapshot?.meta.index ?? 0;
  }

  /** Applies newly committed entries; a leader skips those through `ownThrough`, applied when it proposed them. */
  applyCommitted(entries: readonly Entry[], ownThrough: number): void {
    for (const e of entries) {
      if (e.index <= this.applied) continue;
      this.applied = e.index;
      if (e.index > ownThrough) this.apply(e, this.table);
    }
    let n = 0;
    while (n < this.endedUncommitted.length && this.endedUncommitted[n]!.index <= this.applied) n++;
    if (n > 0) this.endedUncommitted.splice(0, n);
  }

  /** Leader: `record` left the table by the entry at `index` (see endedUncommitted). */
  ended(record: LeasedRecord, index: number): void {
    this.endedUncommitted.push({ index, token: record.token, due: record.due });
  }

  /** A new leader: entries after `applied` are not committed yet, but they are its own to commit now. */
  catchUp(slice: LogSlice, snapshotIndex: number, lastIndex: number): void {
    if (lastIndex > this.applied) for (const e of slice(Math.max(this.applied, snapshotIndex) + 1, lastIndex)) this.apply(e, this.table);
  }

  /** A snapshot from the leader replaces the state. */
  install(snapshot: StoredSnapshot): void {
    this.snapshot = snapshot;
    this.table = this.restore();
    this.applied = snapshot.meta.index;
  }

  /**
   * No longer leading: back to the committed state. A lock that stays keeps
   * the deadline it had (set on this node's monotonic clock when it granted
   * or applied it): a fresh lease at every leadership change would let a dead
   * client's lock live on for as long as leaders keep changing.
   */
  rebuild(slice: LogSlice): void {
    const before = this.table;
    const endedDue = new Map(this.endedUncommitted.map((x) => [x.token, x.due]));
    this.endedUncommitted = [];
    this.table = this.committedTable(slice);
    for (const r of this.table.records()) {
      const old = before.get(r.key);
      if (old !== undefined && old.token === r.token) r.due = old.due;
      // Ended by this leader, not committed: back with the deadline it had (issue 27, D-6: an
      // expired lock got a fresh full lease).
      else r.due = endedDue.get(r.token) ?? r.due;
    }
  }

  /** The table as of the applied index: the last snapshot and the committed entries after it. */
  committedTable(slice: LogSlice): LockTable<LeasedRecord> {
    const table = this.restore();
    const from = (this.snapshot?.meta.index ?? 0) + 1;
    if (this.applied >= from) for (const e of slice(from, this.applied)) this.apply(e, table);
    return table;
  }

  private restore(): LockTable<LeasedRecord> {
    const s = this.snapshot;
    return s === undefined ? new LockTable(1n, this.records) : LockTable.restore(s.table, this.records);
  }

  private apply(e: Entry, table: LockTable<LeasedRecord>): void {
    // A membership entry is the consensus layer's: the lock table has nothing to do with it.
    if (!isConfigurationCommand(e.command)) table.apply(decodeCommand(e.command));
  }
}
