/**
 * The active node's side of replication: the command log that applies each
 * command to the lock table and ships it, in order, to every standby that
 * follows. A standby first gets a snapshot (sent in slices so a large table
 * does not stall the node), then the commands applied after the snapshot's
 * point. No quorum: shipping is asynchronous, but what was applied is
 * written to the standbys' sockets before any reply that depends on it
 * (flushNow, called by the node before it writes replies), and standbys'
 * acknowledgements can hold replies (sync-standbys, confirmedBy).
 */
import type { Clock } from '../seams/clock.js';
import type { LeasedLog, LeasedRecord } from '../engine/lock-engine.js';
import type { Command, Result, Token } from '../state-machine/commands.js';
import type { LockTable } from '../state-machine/lock-table.js';
import { encodePeerMessage, encodeReplicated } from './peer-protocol.js';

export interface ReplicationLink {
  /** Queues text on the outbound link to `peer`; false when the link is down. */
  send(peer: string, text: string): boolean;
  flushNow(peer: string): void;
}

interface Follower {
  /** Stream position at the snapshot's point. */
  base: number;
  /** Batches produced while the snapshot is still being sent. */
  pending: string[] | undefined;
  acked: number;
  lastAckAt: number;
  /** It has acknowledged the snapshot (acked counts from then on). */
  confirmed: boolean;
}

/** Locks written per slice of a snapshot. */
const SNAPSHOT_SLICE = 5_000;

export class ReplicationSource implements LeasedLog {
  /** Commands applied since this node became active: the stream's position. */
  private seq = 0;
  private batch = '';
  private flushQueued = false;
  private readonly followers = new Map<string, Follower>();
  /** Send time of recent sequence numbers, for lag in milliseconds. */
  private readonly sentAt: Array<[number, number]> = [];
  private readonly flushFn = (): void => this.flush();

  constructor(
    readonly table: LockTable<LeasedRecord>,
    private readonly link: ReplicationLink,
    private readonly clock: Clock,
    /** The activation this stream belongs to (role-machine.ts). */
    readonly epoch: Token,
  ) {}

  apply(command: Command): Result<LeasedRecord> {
    const result = this.table.apply(command);
    this.seq++;
    this.batch += encodeReplicated(command, result.type === 'granted' ? result.token : undefined);
    if (!this.flushQueued) {
      this.flushQueued = true;
      // Once per event-loop turn: every connection's commands of the turn in one write per standby.
      this.clock.soon(this.flushFn);
    }
    return result;
  }

  get sequence(): number {
    return this.seq;
  }

  /** Starts (or restarts) the stream to `peer`: snapshot, then live commands. False: our link to it is not up. */
  follow(peer: string): boolean {
    this.flush();
    const now = this.clock.now();
    const records = [...this.table.records()];
    const follower: Follower = { base: this.seq, pending: [], acked: this.seq, lastAckAt: now, confirmed: false };
    this.followers.set(peer, follower);
    if (!this.link.send(peer, encodePeerMessage({ type: 'snapshot', epoch: this.epoch, position: this.seq, nextToken: this.table.nextToken, count: records.length }))) {
      this.followers.delete(peer);
      return false;
    }
    let i = 0;
    const sendSlice = () => {
      if (this.followers.get(peer) !== follower) return; // replaced or dropped meanwhile
      let text = '';
      const end = Math.min(records.length, i + SNAPSHOT_SLICE);
      for (; i < end; i++) {
        const r = records[i]!;
        text += `S ${r.key} ${r.token} ${r.leaseMs} ${Math.max(0, Math.ceil(r.due - now))}${r.owner === undefined ? '' : ` ~${r.owner}`}\n`;
      }
      if (i < records.length) {
        if (this.link.send(peer, text)) this.clock.soon(sendSlice);
        else this.followers.delete(peer);
        return;
      }
      const live = follower.pending!;
      follower.pending = undefined;
      if (!this.link.send(peer, text + encodePeerMessage({ type: 'snapshot-end' }) + live.join(''))) this.followers.delete(peer);
    };
    sendSlice();
    return true;
  }

  unfollow(peer: string): void {
    this.followers.delete(peer);
  }

  isFollowing(peer: string): boolean {
    return this.followers.has(peer);
  }

  /** `peer` has applied the stream through `position`; true if that moved anything. */
  ack(peer: string, position: number): boolean {
    const f = this.followers.get(peer);
    if (f === undefined || position < f.base || position > this.seq) return false;
    const moved = !f.confirmed || position > f.acked;
    f.acked = position;
    f.confirmed = true;
    f.lastAckAt = this.clock.now();
    return moved;
  }

  /**
   * The highest sequence number the first `n` standbys by `rank` (priority:
   * the ones that would take over first) have all acknowledged; -1 while
   * fewer than `n` follow or one of them has not confirmed its snapshot.
   * Acks from any `n` would not do: a standby that had not acknowledged
   * could be the one that takes over.
   */
  confirmedBy(n: number, rank: (peer: string) => number): number {
    const first = [...this.followers].sort(([a], [b]) => rank(a) - rank(b)).slice(0, n);
    if (first.length < n || first.some(([, f]) => !f.confirmed)) return -1;
    return Math.min(...first.map(([, f]) => f.acked));
  }

  /** Standbys that acknowledged something within the last `ms` (none: this active replicates to nobody). */
  ackingWithin(ms: number): number {
    const now = this.clock.now();
    let n = 0;
    for (const f of this.followers.values()) if (f.confirmed && now - f.lastAckAt < ms) n++;
    return n;
  }

  /** Writes what was applied so far to every standby's socket now (before the replies that depend on it). */
  flushNow(): void {
    if (this.batch !== '') this.flush();
  }

  /** Commands `peer` has not confirmed yet (undefined if it does not follow). */
  lag(peer: string): number | undefined {
    const f = this.followers.get(peer);
    return f === undefined ? undefined : this.seq - f.acked;
  }

  /** Milliseconds since the oldest command `peer` has not confirmed was sent (0 when in sync). */
  lagMs(peer: string): number | undefined {
    const f = this.followers.get(peer);
    if (f === undefined) return undefined;
    if (f.acked >= this.seq) return 0;
    const entry = this.sentAt.find(([s]) => s > f.acked);
    return entry === undefined ? 0 : this.clock.now() - entry[1];
  }

  /**
   * Streaming: its snapshot was sent whole and it has acknowledged it, so it
   * applies every later command in order. A hand-off to it needs no more: the
   * HANDOFF follows the last command on the same ordered stream.
   */
  streaming(peer: string): boolean {
    const f = this.followers.get(peer);
    return f !== undefined && f.pending === undefined && f.confirmed;
  }

  /** In sync: has confirmed every command and its snapshot is complete. */
  inSync(peer: string): boolean {
    const f = this.followers.get(peer);
    return f !== undefined && f.pending === undefined && f.acked >= this.seq;
  }

  /** Followers that confirmed their snapshot. */
  get confirmedCount(): number {
    let n = 0;
    for (const f of this.followers.values()) if (f.confirmed) n++;
    return n;
  }

  /**
   * Writes everything produced so far to `peer`, then the message `make`
   * builds from the stream's position (hand-off).
   */
  sendAfterAll(peer: string, make: (position: number) => string): void {
    this.flush();
    if (!this.followers.has(peer)) return;
    this.link.send(peer, make(this.seq));
    this.link.flushNow(peer);
  }

  private flush(): void {
    this.flushQueued = false;
    if (this.batch === '') return;
    const data = this.batch;
    this.batch = '';
    this.sentAt.push([this.seq, this.clock.now()]);
    if (this.sentAt.length > 256) this.sentAt.splice(0, 128);
    for (const [peer, f] of this.followers) {
      if (f.pending !== undefined) f.pending.push(data);
      else if (!this.link.send(peer, data)) this.followers.delete(peer);
      else this.link.flushNow(peer);
    }
  }
}
