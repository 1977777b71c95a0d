/**
 * A standby's copy of the active node's lock table, built from a snapshot and
 * the command stream that follows it. Each lock's lease deadline is tracked
 * on this node's clock from the moment it arrives (never earlier than on the
 * active), so a promoted standby neither extends nor shortens leases.
 */
import type { Clock } from '../engine/clock.js';
import { leasedRecord, type LeasedRecord } from '../engine/lock-engine.js';
import type { Token } from '../state-machine/commands.js';
import { LockTable } from '../state-machine/lock-table.js';
import type { PeerMessage } from './peer-protocol.js';

export class Replica {
  /** The replicated table; undefined until a snapshot has been received whole. */
  table: LockTable | undefined;
  /**
   * The last complete table before the current stream started over: if this
   * node must take over before the new snapshot is complete, it is far better
   * than nothing.
   */
  fallback: LockTable | undefined;
  /** Commands applied since the snapshot. */
  appliedSeq = 0;
  private building: { nextToken: Token; locks: Array<[string, Token, number, number]> } | undefined;

  constructor(
    private readonly clock: Clock,
    /** The stream disagrees with this table (a replicated grant got another token): resynchronise. */
    private readonly onDiverged: (why: string) => void,
  ) {}

  /** Forgets everything, fallback included (this node's own table takes over). */
  clear(): void {
    this.reset();
    this.fallback = undefined;
  }

  get synced(): boolean {
    return this.table !== undefined && this.building === undefined;
  }

  /** A new stream is about to start: keep the last complete table only as a fallback. */
  reset(): void {
    if (this.table !== undefined) this.fallback = this.table;
    this.table = undefined;
    this.building = undefined;
    this.appliedSeq = 0;
  }

  /** Applies one replication message; returns true if it was one. */
  handle(m: PeerMessage): boolean {
    switch (m.type) {
      case 'snapshot':
        this.table = undefined;
        this.building = { nextToken: m.nextToken, locks: [] };
        return true;
      case 'snapshot-lock':
        this.building?.locks.push([m.key, m.token, m.leaseMs, m.remainingMs]);
        return true;
      case 'snapshot-end': {
        const b = this.building;
        if (b === undefined) return true;
        const now = this.clock.now();
        const table = LockTable.restore(
          { nextToken: b.nextToken.toString(), locks: b.locks.map(([key, token, leaseMs]) => [key, token.toString(), leaseMs] as const) },
          leasedRecord,
        );
        for (const [key, , , remainingMs] of b.locks) (table.get(key) as LeasedRecord).due = now + remainingMs;
        this.table = table;
        this.fallback = undefined;
        this.building = undefined;
        this.appliedSeq = 0;
        return true;
      }
      case 'command': {
        const table = this.table;
        if (table === undefined || this.building !== undefined) return true; // mid-snapshot: the active queues these for us
        const r = table.apply(m.command);
        this.appliedSeq++;
        if (m.command.type === 'grant') {
          if (r.type !== 'granted' || r.token !== m.token) {
            this.onDiverged(`replicated grant of ${m.command.key} got token ${r.type === 'granted' ? r.token : 'none'}, expected ${m.token}`);
            return true;
          }
          (r.record as LeasedRecord).due = this.clock.now() + m.command.leaseMs;
        }
        return true;
      }
      default:
        return false;
    }
  }
}
