/**
 * The lock engine: FIFO queues per key, wait deadlines, lease deadlines,
 * limits, and the decision of which command to apply next. Its clock and
 * timer are injected; it does no I/O. Every change of lock state goes
 * through the command log (the replication point), never around it.
 */
import type { CommandLog } from '../state-machine/command-log.js';
import { LockRecord, type Command, type Result, type Token } from '../state-machine/commands.js';
import type { RecordFactory } from '../state-machine/lock-table.js';
import type { Clock, TimerHandle } from '../seams/clock.js';
import { NO_PROBES, type Probes } from '../seams/environment.js';
import { TimerWheel, type TimerNode } from './timer-wheel.js';
import { WaitQueue, Waiter, type WaiterOwner } from './waiter.js';

export interface EngineLimits {
  /** Most keys held at once (checked only when a free key would become held). */
  readonly maxLocks: number;
  readonly maxWaitersPerKey: number;
  readonly maxWaiters: number;
}

/** Asked before every grant: may the next token be issued? (token high-water reservation) */
export type TokenGuard = (nextToken: Token) => boolean;

export interface EngineStats {
  grants: number;
  handOffs: number;
  releases: number;
  releaseMisses: number;
  /** X answered X (the grant got its new lease) or G (not held under that token, by that identity, or its lease had run out). */
  extensions: number;
  extensionMisses: number;
  /** Grants ended by an operator (the admin API's force-release). */
  forcedReleases: number;
  expirations: number;
  /** Queued acquires whose wait ran out. */
  timeouts: number;
  /** Acquires with wait 0 that found the key held (answered T at once). */
  triesRefused: number;
  busy: number;
  ghostReleases: number;
}

/**
 * Timings for metrics, told as they happen. Counts are in `stats`; this is
 * for what needs a duration. Must be cheap: it runs on every grant.
 */
export interface EngineObserver {
  /** A grant: `waitedMs` is 0 for an immediate grant, the time queued for a hand-off. */
  granted(waitedMs: number, handOff: boolean): void;
  /** A grant ended after `heldMs`, by release (an operator's included) or by its lease running out. */
  ended(heldMs: number, how: 'released' | 'expired'): void;
  /** A waiter's wait ran out after `waitedMs`. */
  timedOut(waitedMs: number): void;
}

const NO_OBSERVER: EngineObserver = { granted() {}, ended() {}, timedOut() {} };

/** What an acquire got at once: a token, a place in the queue, or a definite no. */
export type AcquireOutcome = Token | Waiter | 'timeout' | 'busy';

/** Resolution of the engine's single timer; T is written within this (plus event-loop delay) of its deadline. */
export const TICK_MS = 10;
/** Ring size: 2^15 ticks of 10 ms = 327 s, beyond the longest wait (255 s) and lease (250 s). */
const WHEEL_SLOTS = 1 << 15;
/** What looking at one slot of the wheel costs, measured: a year of ticks one by one took 6.5 s (D-3). */
const WHEEL_SLOT_NS = 2;

/**
 * A held lock with its lease deadline (this node's clock), filed in the timer
 * wheel while the node serves (lane 0: lease ends before wait ends).
 */
export class LeasedRecord extends LockRecord implements TimerNode {
  wheelTick = -1;
  wheelPrev: TimerNode | null = null;
  wheelNext: TimerNode | null = null;

  constructor(
    key: string,
    token: Token,
    leaseMs: number,
    public due: number,
    /** When this node's table started holding the grant (its clock): kept across extensions. */
    readonly since: number = due - leaseMs,
  ) {
    super(key, token, leaseMs);
  }

  get wheelLane(): 0 {
    return 0;
  }
}

/** The log of a node this engine serves: its table's records carry lease deadlines. */
export type LeasedLog = CommandLog<LeasedRecord>;

export class LockEngine {
  readonly stats: EngineStats = {
    grants: 0,
    handOffs: 0,
    releases: 0,
    releaseMisses: 0,
    expirations: 0,
    timeouts: 0,
    triesRefused: 0,
    busy: 0,
    ghostReleases: 0,
    extensions: 0,
    extensionMisses: 0,
    forcedReleases: 0,
  };
  private readonly queues = new Map<string, WaitQueue>();
  private readonly wheel: TimerWheel<LeasedRecord | Waiter>;
  private waiterCount = 0;
  observer: EngineObserver = NO_OBSERVER;
  private tickTimer: TimerHandle | undefined;
  /** The command log while this node serves; undefined while it does not. */
  private log: LeasedLog | undefined;
  private tokenGuard: TokenGuard = () => true;
  private frozen = false;
  private readonly onTick = (): void => this.tick();
  private readonly fire = (node: LeasedRecord | Waiter): void => {
    if (node instanceof Waiter) this.waitRanOut(node);
    else this.leaseRanOut(node, this.clock.now());
  };

  /**
   * The one place lease deadlines are set: every lock table of this node
   * (served, a standby's replica, a Raft follower's) makes its records with
   * this, so a lock's deadline starts on this node's clock when the table
   * starts holding it, or when an Extend gives it a new lease, whichever
   * command or snapshot put it there. A new command that creates a lease
   * gets its deadline here with no code of its own, on the active node and
   * on every replica alike.
   */
  readonly records: RecordFactory<LeasedRecord> = (key, token, leaseMs, remainingMs = leaseMs, extending) => {
    const at = Number.isNaN(this.applyNow) ? this.clock.now() : this.applyNow;
    // Whole milliseconds: a small integer lives in the record itself, a fraction in a number object of
    // its own (16 bytes more per held lock); the hold-time metric needs no finer.
    return new LeasedRecord(key, token, leaseMs, Math.ceil(at + remainingMs), extending?.since ?? Math.floor(at - (leaseMs - remainingMs)));
  };
  /**
   * The clock time of the request whose command is being applied (NaN
   * otherwise): a lease counts from when its request arrived, and it saves
   * reading the clock twice per grant.
   */
  private applyNow = NaN;

  constructor(
    /** Only time and one timer: the engine needs no more of the clock. */
    private readonly clock: Pick<Clock, 'now' | 'schedule'>,
    public limits: EngineLimits,
    /** What the timer wheel's catching up costs, for the simulator's CPU model (seams/environment.ts). */
    private readonly probes: Pick<Probes, 'spend'> = NO_PROBES,
  ) {
    this.wheel = new TimerWheel(TICK_MS, WHEEL_SLOTS, clock.now());
  }

  /**
   * Starts serving over `log` (the node is, or became, the one that serves
   * clients). Locks already in its table keep the deadline this node tracked
   * for them since its table took them (a promoted standby, a new leader).
   */
  serve(log: LeasedLog, tokenGuard: TokenGuard = () => true): this {
    this.log = log;
    this.tokenGuard = tokenGuard;
    for (const record of log.table.records()) this.wheel.add(record, record.due);
    this.ensureTicking();
    return this;
  }

  get serving(): boolean {
    return this.log !== undefined;
  }

  /** The token the next grant gets (undefined while not serving). */
  get nextToken(): Token | undefined {
    return this.log?.table.nextToken;
  }

  get heldCount(): number {
    return this.log?.table.size ?? 0;
  }

  get waitingCount(): number {
    return this.waiterCount;
  }

  /** Waiters queued on `key` (0 when none). */
  queueLength(key: string): number {
    return this.queues.get(key)?.length ?? 0;
  }

  /** Keys with waiters, longest queues first. */
  mostContended(limit: number): Array<{ key: string; waiters: number }> {
    const all = [...this.queues].map(([key, q]) => ({ key, waiters: q.length }));
    all.sort((a, b) => b.waiters - a.waiters);
    return all.slice(0, limit);
  }

  /**
   * Acquire `key` for `owner`. Returns the token when granted at once,
   * 'timeout' (wait 0 on a held key), 'busy' (a limit), or the Waiter now
   * queued; a queued waiter's outcome reaches `owner` later.
   *
   * `now` is when the request arrived: a session reads the clock once per
   * chunk of pipelined requests and passes it here (reading it per request
   * was 4-6% of the server's busy time at 50 x 64 pipelined pairs). It is
   * never later than the real time, so a lease deadline computed from it is
   * still after the client's own (which starts before it sent the request).
   */
  acquire(owner: WaiterOwner, key: string, waitMs: number, leaseMs: number, tag: unknown, now: number = this.clock.now()): AcquireOutcome {
    const log = this.log;
    if (log === undefined) return 'busy';
    let held = log.table.get(key);
    // A lease that ran out but whose timer has not fired yet ends now, and
    // its waiters go first (FIFO), before this request is considered.
    if (held !== undefined && this.leaseEnded(held, now)) {
      this.leaseRanOut(held, now);
      held = log.table.get(key);
    }
    // (No queue at all is the uncontended case: one Map lookup less per acquire.)
    const queue = this.queues.size === 0 ? undefined : this.queues.get(key);
    if (held === undefined && queue === undefined) {
      if (log.table.size >= this.limits.maxLocks) return this.busy();
      const record = this.grant(key, leaseMs, now, owner.identity);
      if (record === undefined) return this.busy();
      this.observer.granted(0, false);
      return record.token;
    }
    if (waitMs === 0) {
      this.stats.triesRefused++;
      return 'timeout';
    }
    if ((queue?.length ?? 0) >= this.limits.maxWaitersPerKey || this.waiterCount >= this.limits.maxWaiters) {
      return this.busy();
    }
    const waiter = new Waiter(owner, key, leaseMs, now, tag);
    let q = queue;
    if (q === undefined) {
      q = new WaitQueue();
      this.queues.set(key, q);
    }
    q.push(waiter);
    this.waiterCount++;
    this.wheel.add(waiter, Math.ceil(now + waitMs));
    this.ensureTicking();
    return waiter;
  }

  /**
   * Release the grant of `key` holding `token`. True: released; false: not
   * held under that token, or acquired by another identity than `identity`
   * (a bare-token grant, owner undefined, only by a bare-token connection).
   * `now`: when the request arrived (see acquire).
   */
  release(key: string, token: Token, identity?: string, now: number = this.clock.now()): boolean {
    const record = this.current(key, token, identity, now);
    if (record === undefined) {
      this.stats.releaseMisses++;
      return false;
    }
    this.end(record, now);
    this.stats.releases++;
    return true;
  }

  /**
   * An operator's release of exactly the grant of `key` holding `token`,
   * whoever acquired it (the admin API: authenticated and logged there).
   * True: released; false: not held under that token.
   */
  forceRelease(key: string, token: Token, now: number = this.clock.now()): boolean {
    const record = this.log?.table.get(key);
    if (record === undefined || record.token !== token || this.ranOut(record, now)) return false;
    this.end(record, now);
    this.stats.forcedReleases++;
    return true;
  }

  /**
   * Extend the grant of `key` holding `token`: it keeps its token, and its
   * lease becomes `leaseMs` from `now` (when the request arrived; it may be
   * shorter than what was left). True: extended; false (`G`): not held
   * under that token, held by another identity, or its lease had run out
   * (it ends now, as at its deadline: an extension never revives a grant).
   */
  extend(key: string, token: Token, leaseMs: number, identity?: string, now: number = this.clock.now()): boolean {
    const record = this.current(key, token, identity, now);
    if (record === undefined) {
      this.stats.extensionMisses++;
      return false;
    }
    const result = this.applyAt(now, { type: 'extend', key, token, leaseMs });
    if (result.type !== 'extended') return false; // (defensive: `current` found it)
    // The record was replaced, with its new deadline (see `records`).
    this.stopLease(result.previous);
    this.wheel.add(result.record, result.record.due);
    this.ensureTicking();
    this.stats.extensions++;
    return true;
  }

  /**
   * The grant of `key` holding `token`, if it is current and `identity` may
   * end or extend it (R and X follow the same rule); undefined otherwise. A
   * lease that ran out before `now` ends here, its waiters served first.
   */
  private current(key: string, token: Token, identity: string | undefined, now: number): LeasedRecord | undefined {
    const record = this.log?.table.get(key);
    if (record === undefined || record.token !== token || !heldBy(record, identity)) return undefined;
    return this.ranOut(record, now) ? undefined : record;
  }

  /** True (and the grant ended) if `record`'s lease ran out at or before `now`, its timer not fired yet. */
  private ranOut(record: LeasedRecord, now: number): boolean {
    if (!this.leaseEnded(record, now)) return false;
    this.leaseRanOut(record, now);
    return true;
  }

  /** Releases `record` and hands its key to the next waiter. */
  private end(record: LeasedRecord, now: number): void {
    this.log!.apply({ type: 'release', key: record.key, token: record.token });
    this.stopLease(record);
    this.observer.ended(this.heldFor(record, now), 'released');
    this.handOff(record.key, now);
  }

  /** A held lock's record in this node's table (undefined while not serving, or not held). */
  held(key: string): LeasedRecord | undefined {
    return this.log?.table.get(key);
  }

  /** Every held lock's record in this node's table (none while not serving). */
  heldRecords(): IterableIterator<LeasedRecord> {
    return this.log?.table.records() ?? [].values();
  }

  /** The waiters queued on `key`, oldest first. */
  waitersOf(key: string): Waiter[] {
    const out: Waiter[] = [];
    for (let w = this.queues.get(key)?.head ?? null; w !== null; w = w.queueNext) out.push(w);
    return out;
  }

  /** Takes a waiter out of its queue without an answer (its connection closed). */
  cancel(waiter: Waiter): void {
    if (!waiter.queued) return;
    this.dequeue(waiter);
  }

  /**
   * The node stops serving (shutdown, hand-off, demotion): every waiting
   * acquire is answered `T` (definite: nothing granted), lease deadlines are
   * dropped (whoever serves next tracks its own), and nothing more is granted
   * or queued until `serve` is called again.
   */
  stop(): void {
    for (const queue of [...this.queues.values()]) {
      for (let w = queue.head; w !== null; w = queue.head) {
        this.dequeue(w);
        w.owner.timedOut(w);
      }
    }
    if (this.log !== undefined) for (const r of this.log.table.records()) this.wheel.remove(r);
    this.log = undefined;
    this.frozen = false;
    this.tickTimer?.cancel();
    this.tickTimer = undefined;
  }

  /**
   * Holds every deadline (a hand-off is under way: the successor takes over
   * the deadlines, so nothing may expire or time out here meanwhile).
   */
  freeze(): void {
    this.frozen = true;
    this.tickTimer?.cancel();
    this.tickTimer = undefined;
  }

  thaw(): void {
    this.frozen = false;
    this.ensureTicking();
  }

  private busy(): 'busy' {
    this.stats.busy++;
    return 'busy';
  }

  private leaseEnded(record: LeasedRecord, now: number): boolean {
    return record.due <= now;
  }

  private grant(key: string, leaseMs: number, now: number, owner: string | undefined): LeasedRecord | undefined {
    const log = this.log!;
    if (!this.tokenGuard(log.table.nextToken)) return undefined;
    const result = this.applyAt(now, owner === undefined ? { type: 'grant', key, leaseMs } : { type: 'grant', key, leaseMs, owner });
    if (result.type !== 'granted') return undefined;
    // Its deadline was set when the table made the record (see `records`).
    this.wheel.add(result.record, result.record.due);
    this.ensureTicking();
    this.stats.grants++;
    return result.record;
  }

  /** Applies `command` for a request that arrived at `now`: a lease it makes counts from then (see `records`). */
  private applyAt(now: number, command: Command): Result<LeasedRecord> {
    this.applyNow = now;
    try {
      return this.log!.apply(command);
    } finally {
      this.applyNow = NaN;
    }
  }

  /** How long `record` has been held. */
  private heldFor(record: LeasedRecord, now: number): number {
    return Math.max(0, now - record.since);
  }

  private stopLease(record: LeasedRecord): void {
    this.wheel.remove(record);
  }

  private leaseRanOut(record: LeasedRecord, now: number): void {
    this.stopLease(record);
    const result = this.log!.apply({ type: 'expire', key: record.key, token: record.token });
    if (result.type === 'expired' && result.existed) {
      this.stats.expirations++;
      this.observer.ended(this.heldFor(record, now), 'expired');
      this.handOff(record.key, now);
    }
  }

  private waitRanOut(waiter: Waiter): void {
    this.dequeue(waiter);
    this.stats.timeouts++;
    this.observer.timedOut(this.clock.now() - waiter.since);
    waiter.owner.timedOut(waiter);
  }

  /**
   * The key just became free: grant it to the head of its queue, if any
   * (FIFO, a new token). A waiter whose wait ran out more than a tick ago
   * gets T instead: the node did not run meanwhile (a stopped process, a
   * suspended VM), and a grant now would reach a client that stopped
   * waiting long ago (the official clients have given the connection up
   * for silent by then). A running node times such a waiter out at its own
   * tick, before any of this.
   */
  private handOff(key: string, now: number): void {
    const queue = this.queues.size === 0 ? undefined : this.queues.get(key);
    if (queue === undefined || this.log === undefined) return;
    for (let w = queue.head; w !== null; w = queue.head) {
      if (w.due <= now - TICK_MS) {
        this.waitRanOut(w);
        continue;
      }
      const record = this.grant(key, w.leaseMs, now, w.owner.identity);
      if (record === undefined) return; // tokens unavailable: the node is stopping; waiters get T then
      this.dequeue(w);
      this.stats.handOffs++;
      this.observer.granted(now - w.since, true);
      if (w.owner.granted(w, record.token)) return;
      // The waiter's connection is gone: release this ghost grant at once.
      this.log.apply({ type: 'release', key, token: record.token });
      this.stopLease(record);
      this.stats.ghostReleases++;
    }
  }

  private dequeue(waiter: Waiter): void {
    const queue = this.queues.get(waiter.key)!;
    queue.remove(waiter);
    if (queue.length === 0) this.queues.delete(waiter.key);
    this.wheel.remove(waiter);
    this.waiterCount--;
  }

  private ensureTicking(): void {
    if (this.tickTimer === undefined && this.log !== undefined && !this.frozen && this.wheel.size > 0) {
      this.tickTimer = this.clock.schedule(TICK_MS, this.onTick);
    }
  }

  private tick(): void {
    this.tickTimer = undefined;
    const looked = this.wheel.advance(this.clock.now(), this.fire);
    this.probes.spend(looked * WHEEL_SLOT_NS);
    if (this.wheel.size > 0) this.ensureTicking();
  }
}

/**
 * Who may end or extend a grant (R and X share this rule): a connection of
 * the identity that acquired it; a bare-token grant (owner undefined) only a
 * bare-token connection (PROTOCOL.md, docs/security.md).
 */
function heldBy(record: LeasedRecord, identity: string | undefined): boolean {
  return record.owner === identity;
}
