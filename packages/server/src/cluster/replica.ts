/**
 * A standby's copy of the active node's lock table, built from a snapshot and
 * the command stream that follows it. It knows which activation (epoch) the
 * table comes from and its position in that activation's stream: the claim
 * the role machine compares (role-machine.ts, Dominance). Its records come from the engine's
 * record factory, so each lock's lease deadline runs on this node's clock
 * from the moment it arrives (never earlier than on the active), set by the
 * same code as on the active: a promoted standby neither extends nor
 * shortens leases.
 */
import type { LeasedRecord } from '../engine/lock-engine.js';
import type { Token } from '../state-machine/commands.js';
import { LockTable, type RecordFactory } from '../state-machine/lock-table.js';
import type { PeerMessage } from './peer-protocol.js';
import { PeerProtocolError } from '../errors.js';

/** The most locks a snapshot can hold: the largest max-locks the configuration allows. */
const MAX_SNAPSHOT_LOCKS = 100_000_000;

export class Replica {
  /** The replicated table; undefined until a snapshot has been received whole. */
  table: LockTable<LeasedRecord> | undefined;
  /**
   * The last complete table before the current stream started over: if this
   * node must take over before the new snapshot is complete, it is far better
   * than nothing.
   */
  fallback: LockTable<LeasedRecord> | undefined;
  /** The activation `table` comes from, and the stream position it has applied (global in that activation). */
  epoch = 0n;
  position = 0;
  private fallbackAt: { epoch: Token; position: number } | undefined;
  private building: { epoch: Token; position: number; nextToken: Token; count: number; locks: Array<[string, Token, number, number, string?]> } | undefined;

  constructor(
    /** The engine's record factory: where lease deadlines are set. */
    private readonly records: RecordFactory<LeasedRecord>,
    /** The stream disagrees with this table (a replicated grant got another token): resynchronise. */
    private readonly onDiverged: (why: string) => void,
    /** Tokens this node can believe a peer issued (its clock bounds them; see priority-mode.ts). */
    private readonly plausible: (t: Token, field: string) => void = () => {},
  ) {}

  /** The table this node would take over with: its epoch and position, and whether it is the current stream's. */
  claim(): { epoch: Token; position: number; complete: boolean } | undefined {
    if (this.table !== undefined && this.building === undefined) return { epoch: this.epoch, position: this.position, complete: true };
    if (this.fallback !== undefined && this.fallbackAt !== undefined) return { ...this.fallbackAt, complete: false };
    return undefined;
  }

  /** The table to take over with: the current one, or the last complete one. */
  get best(): LockTable<LeasedRecord> | undefined {
    return this.synced ? this.table : this.fallback;
  }

  /** Forgets everything, fallback included (this node's own table takes over). */
  clear(): void {
    this.reset();
    this.fallback = undefined;
    this.fallbackAt = undefined;
  }

  get synced(): boolean {
    return this.table !== undefined && this.building === undefined;
  }

  /** A new stream is about to start: keep the last complete table only as a fallback. */
  reset(): void {
    if (this.table !== undefined && this.building === undefined) {
      this.fallback = this.table;
      this.fallbackAt = { epoch: this.epoch, position: this.position };
    }
    this.table = undefined;
    this.building = undefined;
    this.epoch = 0n;
    this.position = 0;
  }

  /** Applies one replication message; returns true if it was one. */
  handle(m: PeerMessage): boolean {
    switch (m.type) {
      case 'snapshot':
        // Bounded by what the configuration allows at most (the announced count is checked as locks arrive).
        if (m.count > MAX_SNAPSHOT_LOCKS) throw new PeerProtocolError(`snapshot of ${m.count} locks is above any max-locks`);
        this.plausible(m.nextToken, 'next-token');
        this.reset();
        this.building = { epoch: m.epoch, position: m.position, nextToken: m.nextToken, count: m.count, locks: [] };
        return true;
      case 'snapshot-lock':
        if (this.building === undefined) return true;
        if (this.building.locks.length >= this.building.count) throw new PeerProtocolError('more snapshot locks than the snapshot announced');
        this.plausible(m.token, 'token');
        this.building.locks.push([m.key, m.token, m.leaseMs, m.remainingMs, m.owner]);
        return true;
      case 'snapshot-end': {
        const b = this.building;
        if (b === undefined) return true;
        this.table = LockTable.restore(
          { nextToken: b.nextToken.toString(), locks: b.locks.map(([key, token, leaseMs, remainingMs, owner]) => [key, token.toString(), leaseMs, remainingMs, owner] as const) },
          this.records,
        );
        this.fallback = undefined;
        this.fallbackAt = undefined;
        this.epoch = b.epoch;
        this.position = b.position;
        this.building = undefined;
        return true;
      }
      case 'command': {
        const table = this.table;
        if (table === undefined || this.building !== undefined) return true; // mid-snapshot: the active queues these for us
        if (m.token !== undefined) this.plausible(m.token, 'token');
        if (m.command.type === 'token-floor') this.plausible(m.command.atLeast, 'token-floor');
        // A replicated grant carries the token the active gave it (its hybrid clock, hlc.ts): take it.
        if (m.command.type === 'grant' && m.token !== undefined && m.token > table.nextToken) table.apply({ type: 'token-floor', atLeast: m.token });
        const r = table.apply(m.command);
        this.position++;
        if (m.command.type === 'grant' && (r.type !== 'granted' || r.token !== m.token)) {
          this.onDiverged(`replicated grant of ${m.command.key} got token ${r.type === 'granted' ? r.token : 'none'}, expected ${m.token}`);
        }
        return true;
      }
      default:
        return false;
    }
  }
}
