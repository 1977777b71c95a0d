import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../src/seams/clock.js';
import { LockEngine, type TokenGuard, type EngineLimits } from '../src/engine/lock-engine.js';
import { Waiter, type WaiterOwner } from '../src/engine/waiter.js';
import { LocalLog } from '../src/state-machine/local-log.js';
import { LockTable } from '../src/state-machine/lock-table.js';

/** `engine` serving a single node's table, made with the engine's records (lease deadlines). */
function serving(engine: LockEngine, firstToken: bigint, guard?: TokenGuard): LockEngine {
  return engine.serve(new LocalLog(new LockTable(firstToken, engine.records)), guard);
}

type Outcome = { kind: 'granted' | 'ghost'; token: bigint; at: number } | { kind: 'timeout' | 'busy'; at: number };

/** A fake connection: records what the engine tells it. */
class Conn implements WaiterOwner {
  vanished = false;
  readonly waiters = new Set<Waiter>();
  constructor(private readonly record: (reqId: number, o: Outcome) => void, private readonly clock: ManualClock) {}
  granted(w: Waiter, token: bigint): boolean {
    this.waiters.delete(w);
    this.record(w.tag as number, { kind: this.vanished ? 'ghost' : 'granted', token, at: this.clock.now() });
    return !this.vanished;
  }
  timedOut(w: Waiter): void {
    this.waiters.delete(w);
    this.record(w.tag as number, { kind: 'timeout', at: this.clock.now() });
  }
}

/** The reference model: plain arrays and exact times, holders identified by request id. */
class Model {
  now: number;
  readonly holders = new Map<string, { reqId: number; end: number }>();
  readonly queues = new Map<string, Array<{ reqId: number; conn: number; deadline: number; leaseMs: number }>>();
  readonly vanished = new Set<number>();
  readonly outcomes = new Map<number, { kind: string; at: number }>();

  constructor(start: number, private readonly limits: EngineLimits) {
    this.now = start;
  }

  private waiterTotal(): number {
    let n = 0;
    for (const q of this.queues.values()) n += q.length;
    return n;
  }

  private handOff(key: string): void {
    const q = this.queues.get(key);
    while (q !== undefined && q.length > 0) {
      const w = q.shift()!;
      if (this.vanished.has(w.conn)) {
        this.outcomes.set(w.reqId, { kind: 'ghost', at: this.now });
        continue;
      }
      this.outcomes.set(w.reqId, { kind: 'granted', at: this.now });
      this.holders.set(key, { reqId: w.reqId, end: this.now + w.leaseMs });
      break;
    }
    if (q !== undefined && q.length === 0) this.queues.delete(key);
  }

  private expireIfDue(key: string): void {
    const h = this.holders.get(key);
    if (h !== undefined && h.end <= this.now) {
      this.holders.delete(key);
      this.handOff(key);
    }
  }

  acquire(reqId: number, conn: number, key: string, waitMs: number, leaseMs: number): void {
    this.expireIfDue(key);
    const q = this.queues.get(key);
    if (!this.holders.has(key) && q === undefined) {
      if (this.holders.size >= this.limits.maxLocks) this.outcomes.set(reqId, { kind: 'busy', at: this.now });
      else {
        this.holders.set(key, { reqId, end: this.now + leaseMs });
        this.outcomes.set(reqId, { kind: 'granted', at: this.now });
      }
      return;
    }
    if (waitMs === 0) return void this.outcomes.set(reqId, { kind: 'timeout', at: this.now });
    if ((q?.length ?? 0) >= this.limits.maxWaitersPerKey || this.waiterTotal() >= this.limits.maxWaiters) {
      return void this.outcomes.set(reqId, { kind: 'busy', at: this.now });
    }
    const queue = q ?? [];
    queue.push({ reqId, conn, deadline: this.now + waitMs, leaseMs });
    this.queues.set(key, queue);
  }

  release(key: string, reqId: number): boolean {
    const h = this.holders.get(key);
    if (h === undefined || h.reqId !== reqId) return false;
    if (h.end <= this.now) {
      this.expireIfDue(key);
      return false;
    }
    this.holders.delete(key);
    this.handOff(key);
    return true;
  }

  extend(key: string, reqId: number, leaseMs: number): boolean {
    const h = this.holders.get(key);
    if (h === undefined || h.reqId !== reqId) return false;
    if (h.end <= this.now) {
      this.expireIfDue(key);
      return false;
    }
    h.end = this.now + leaseMs;
    return true;
  }

  disconnect(conn: number): void {
    for (const [key, q] of this.queues) {
      const kept = q.filter((w) => w.conn !== conn);
      if (kept.length === 0) this.queues.delete(key);
      else this.queues.set(key, kept);
    }
  }

  advance(ms: number): void {
    const target = this.now + ms;
    for (;;) {
      let next = Infinity;
      for (const h of this.holders.values()) next = Math.min(next, h.end);
      for (const q of this.queues.values()) for (const w of q) next = Math.min(next, w.deadline);
      if (next > target) break;
      this.now = next;
      // Lease ends first, then wait ends at the same instant (the engine's lane order).
      for (const [key, h] of [...this.holders]) if (h.end === next) this.expireIfDue(key);
      for (const [key, q] of [...this.queues]) {
        for (const w of q.filter((x) => x.deadline === next)) {
          q.splice(q.indexOf(w), 1);
          this.outcomes.set(w.reqId, { kind: 'timeout', at: next });
        }
        if (q.length === 0) this.queues.delete(key);
      }
    }
    this.now = target;
  }
}

const KEYS = ['a', 'b', 'c'];
type Op =
  | { op: 'acquire'; conn: number; key: string; wait: number; lease: number }
  | { op: 'release'; key: string; pick: number }
  | { op: 'extend'; key: string; pick: number; lease: number }
  | { op: 'advance'; ms: number }
  | { op: 'disconnect'; conn: number }
  | { op: 'vanish'; conn: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ op: fc.constant('acquire' as const), conn: fc.nat(3), key: fc.constantFrom(...KEYS), wait: fc.nat(3), lease: fc.integer({ min: 1, max: 3 }) }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('release' as const), key: fc.constantFrom(...KEYS), pick: fc.nat(5) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('extend' as const), key: fc.constantFrom(...KEYS), pick: fc.nat(5), lease: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 400 }).map((x) => x * 10) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('disconnect' as const), conn: fc.nat(3) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('vanish' as const), conn: fc.nat(3) }) },
);

function run(ops: Op[], limits: EngineLimits): void {
  const clock = new ManualClock(1_000_000);
  const engineOutcomes = new Map<number, Outcome>();
  const events: Array<{ reqId: number } & Outcome> = [];
  const record = (reqId: number, o: Outcome) => {
    engineOutcomes.set(reqId, o);
    events.push({ reqId, ...o });
  };
  const conns = [0, 1, 2, 3].map(() => new Conn(record, clock));
  const engine = serving(new LockEngine(clock, limits), 1n);
  const model = new Model(clock.now(), limits);
  const requests: Array<{ key: string; leaseMs: number }> = [];

  for (const o of ops) {
    switch (o.op) {
      case 'acquire': {
        const reqId = requests.length;
        requests.push({ key: o.key, leaseMs: o.lease * 1000 });
        const conn = conns[o.conn]!;
        if (conn.vanished) break; // a closed connection sends nothing
        const out = engine.acquire(conn, o.key, o.wait * 1000, o.lease * 1000, reqId);
        if (out instanceof Waiter) conn.waiters.add(out);
        else if (typeof out === 'bigint') record(reqId, { kind: 'granted', token: out, at: clock.now() });
        else record(reqId, { kind: out, at: clock.now() });
        model.acquire(reqId, o.conn, o.key, o.wait * 1000, o.lease * 1000);
        break;
      }
      case 'release': {
        // Release one of the grants ever made on this key (current or stale).
        const grants = events.filter((e) => e.kind === 'granted' && requests[e.reqId]!.key === o.key);
        if (grants.length === 0) break;
        const g = grants[grants.length - 1 - (o.pick % grants.length)]!;
        if (g.kind !== 'granted') break;
        expect(engine.release(o.key, g.token)).toBe(model.release(o.key, g.reqId));
        break;
      }
      case 'extend': {
        // Extend one of the grants ever made on this key (current or stale): the lease grows or shrinks from now.
        const grants = events.filter((e) => e.kind === 'granted' && requests[e.reqId]!.key === o.key);
        if (grants.length === 0) break;
        const g = grants[grants.length - 1 - (o.pick % grants.length)]!;
        if (g.kind !== 'granted') break;
        expect(engine.extend(o.key, g.token, o.lease * 1000)).toBe(model.extend(o.key, g.reqId, o.lease * 1000));
        break;
      }
      case 'advance':
        clock.advance(o.ms);
        model.advance(o.ms);
        break;
      case 'disconnect': {
        const conn = conns[o.conn]!;
        for (const w of [...conn.waiters]) engine.cancel(w);
        conn.waiters.clear();
        model.disconnect(o.conn);
        break;
      }
      case 'vanish':
        // Closed, but its waiters not yet withdrawn: a grant to it is a ghost.
        conns[o.conn]!.vanished = true;
        model.vanished.add(o.conn);
        break;
    }
    // Same outcomes, at the same times, as the model.
    expect(new Map([...engineOutcomes].map(([id, e]) => [id, { kind: e.kind, at: e.at }]))).toEqual(model.outcomes);
    expect(engine.heldCount).toBe(model.holders.size);
  }

  // Tokens strictly increase in grant order, and a key is never granted while
  // an earlier grant's lease is running and it was not released.
  const grantEvents = events.filter((e) => e.kind === 'granted' || e.kind === 'ghost') as Array<{ reqId: number; token: bigint; at: number }>;
  for (let i = 1; i < grantEvents.length; i++) expect(grantEvents[i]!.token).toBeGreaterThan(grantEvents[i - 1]!.token);

  // With every connection gone and every lease over, nothing is left behind.
  for (const conn of conns) for (const w of [...conn.waiters]) engine.cancel(w);
  clock.advance(300_000);
  expect(engine.waitingCount).toBe(0);
  expect(engine.heldCount).toBe(0);
  expect(clock.pendingTimers).toBe(0);
}

describe('LockEngine against a reference model', () => {
  it('agrees on random acquire/release/extend/advance/disconnect sequences (roomy limits)', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 80 }), (ops) => run(ops, { maxLocks: 100, maxWaitersPerKey: 100, maxWaiters: 100 })),
      { numRuns: 400 },
    );
  });

  it('agrees under tight limits (B paths)', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 80 }), (ops) => run(ops, { maxLocks: 2, maxWaitersPerKey: 2, maxWaiters: 3 })),
      { numRuns: 400 },
    );
  });
});

describe('LockEngine rules', () => {
  function setup(limits: EngineLimits = { maxLocks: 10, maxWaitersPerKey: 10, maxWaiters: 10 }) {
    const clock = new ManualClock(0);
    const log: string[] = [];
    const owner: WaiterOwner = {
      granted: (w, t) => (log.push(`A ${t} ${w.key} @${clock.now()}`), true),
      timedOut: (w) => void log.push(`T ${w.key} @${clock.now()}`),
    };
    const engine = serving(new LockEngine(clock, limits), 10n);
    return { clock, log, owner, engine };
  }

  it('hands the lock to the head waiter with a new token on release (FIFO)', () => {
    const { engine, owner, log } = setup();
    expect(engine.acquire(owner, 'k', 5000, 30000, 0)).toBe(10n);
    engine.acquire(owner, 'k', 5000, 30000, 1);
    engine.acquire(owner, 'k', 5000, 30000, 2);
    expect(engine.release('k', 10n)).toBe(true);
    expect(log).toEqual(['A 11 k @0']);
    expect(engine.release('k', 11n)).toBe(true);
    expect(log).toEqual(['A 11 k @0', 'A 12 k @0']);
  });

  it('times a waiter out no earlier than its deadline and within one tick of it', () => {
    const { engine, owner, log, clock } = setup();
    engine.acquire(owner, 'k', 0, 30000, 0);
    engine.acquire(owner, 'k', 2000, 30000, 1);
    clock.advance(1990);
    expect(log).toEqual([]);
    clock.advance(10);
    expect(log).toEqual(['T k @2000']);
  });

  it('passes an expired lease to the head waiter at the lease end', () => {
    const { engine, owner, log, clock } = setup();
    engine.acquire(owner, 'k', 0, 1000, 0);
    engine.acquire(owner, 'k', 5000, 1000, 1);
    clock.advance(1000);
    expect(log).toEqual(['A 11 k @1000']);
    expect(engine.release('k', 10n)).toBe(false); // the old grant is gone
  });

  it('treats a lease that has run out as ended even before its timer fires', () => {
    const { engine, owner } = setup();
    const clock = new ManualClock(0);
    const e = serving(new LockEngine({ now: () => clock.now(), schedule: () => ({ cancel() {} }) }, engine.limits), 1n);
    expect(e.acquire(owner, 'k', 0, 1000, 0)).toBe(1n);
    clock.advance(1000); // no timer fires: the engine must notice by itself
    expect(e.release('k', 1n)).toBe(false);
    expect(e.acquire(owner, 'k', 0, 1000, 1)).toBe(2n);
  });

  it('counts a lease and a wait from the arrival time the session passes, not from a later clock read', () => {
    const { engine, owner, log } = setup(); // (its log's times are of its own clock, at 0)
    const clock = new ManualClock(0);
    const e = serving(new LockEngine({ now: () => clock.now(), schedule: () => ({ cancel() {} }) }, engine.limits), 1n);
    clock.advance(50); // the chunk arrived at 40; the clock has moved on while earlier lines were handled
    expect(e.acquire(owner, 'k', 0, 1000, 0, 40)).toBe(1n);
    // The deadline is 40 + 1000: a release that arrived at 1039 is in time, one that arrived at 1040 is not.
    expect(e.release('k', 1n, undefined, 1039)).toBe(true);
    expect(e.acquire(owner, 'k', 0, 1000, 1, 1039)).toBe(2n); // deadline 2039
    expect(e.acquire(owner, 'k', 5000, 1000, 2, 1500)).toBeInstanceOf(Waiter);
    expect(e.release('k', 2n, undefined, 2039)).toBe(false); // its lease had ended: the waiter gets the key
    expect(log).toEqual(['A 3 k @0']);
  });

  it('keeps a record\'s times in whole milliseconds (a fraction costs a number object per held lock)', () => {
    const clock = new ManualClock(0);
    const e = serving(new LockEngine({ now: () => clock.now(), schedule: () => ({ cancel() {} }) }, { maxLocks: 9, maxWaitersPerKey: 9, maxWaiters: 9 }), 1n);
    expect(e.acquire({ granted: () => true, timedOut: () => {} }, 'k', 0, 1000, 0, 40.37)).toBe(1n);
    expect(e.held('k')).toMatchObject({ due: 1041, since: 40 });
  });

  it('extends a grant from the arrival time, keeping its token; its waiter gets the key at the new deadline, not the old', () => {
    const { engine, owner, log, clock } = setup();
    expect(engine.acquire(owner, 'k', 0, 1000, 0)).toBe(10n);
    engine.acquire(owner, 'k', 10_000, 1000, 1);
    clock.advance(500);
    expect(engine.extend('k', 10n, 3000, undefined, 480)).toBe(true); // arrived at 480: the lease ends at 3480
    expect(engine.held('k')).toMatchObject({ token: 10n, leaseMs: 3000, due: 3480, since: 0 });
    clock.advance(2970); // 3470: the old deadline (1000) passed long ago
    expect(log).toEqual([]);
    clock.advance(10);
    expect(log).toEqual(['A 11 k @3480']);
    expect(engine.stats).toMatchObject({ extensions: 1, extensionMisses: 0, expirations: 1 });
  });

  it('may shorten a lease', () => {
    const { engine, owner, log, clock } = setup();
    engine.acquire(owner, 'k', 0, 60_000, 0);
    engine.acquire(owner, 'k', 10_000, 1000, 1);
    expect(engine.extend('k', 10n, 1000)).toBe(true);
    clock.advance(1000);
    expect(log).toEqual(['A 11 k @1000']);
  });

  it('answers G for another token, another key, or a lease that ran out; a late extension never revives a grant', () => {
    const { engine, owner, log } = setup();
    const clock = new ManualClock(0);
    // No timer fires in this engine: it must notice the lease end by itself, as for a release.
    const e = serving(new LockEngine({ now: () => clock.now(), schedule: () => ({ cancel() {} }) }, engine.limits), 1n);
    expect(e.acquire(owner, 'k', 0, 1000, 0)).toBe(1n);
    e.acquire(owner, 'k', 5000, 1000, 1);
    expect(e.extend('k', 2n, 5000)).toBe(false);
    expect(e.extend('j', 1n, 5000)).toBe(false);
    clock.advance(1000);
    expect(e.extend('k', 1n, 5000)).toBe(false); // its deadline was 1000: gone, and the waiter has the key
    expect(log).toEqual(['A 2 k @0']);
    expect(e.extend('k', 1n, 5000)).toBe(false);
    expect(e.held('k')?.token).toBe(2n);
    expect(e.stats.extensionMisses).toBe(4);
  });

  it('honours an extension only from the identity that acquired (as a release)', () => {
    const { engine, clock } = setup();
    const named: WaiterOwner = { identity: 'billing', granted: () => true, timedOut: () => {} };
    expect(engine.acquire(named, 'k', 0, 1000, 0)).toBe(10n);
    expect(engine.extend('k', 10n, 5000, 'reports')).toBe(false);
    expect(engine.extend('k', 10n, 5000, undefined)).toBe(false);
    expect(engine.extend('k', 10n, 5000, 'billing')).toBe(true);
    clock.advance(4000);
    expect(engine.release('k', 10n, 'reports')).toBe(false);
    expect(engine.held('k')?.owner).toBe('billing'); // the extended record keeps its owner
    expect(engine.release('k', 10n, 'billing')).toBe(true);
  });

  it('force-releases exactly the named grant, whoever acquired it, and hands it on', () => {
    const { engine, owner, log } = setup();
    const named: WaiterOwner = { identity: 'billing', granted: () => true, timedOut: () => {} };
    engine.acquire(named, 'k', 0, 1000, 0);
    engine.acquire(owner, 'k', 5000, 1000, 1);
    expect(engine.forceRelease('k', 11n)).toBe(false);
    expect(engine.forceRelease('k', 10n)).toBe(true);
    expect(log).toEqual(['A 11 k @0']);
    expect(engine.stats).toMatchObject({ forcedReleases: 1, releases: 0 });
  });

  it('answers wait=0 on a held key with T, not B, even at the waiter limits', () => {
    const { engine, owner } = setup({ maxLocks: 1, maxWaitersPerKey: 1, maxWaiters: 1 });
    engine.acquire(owner, 'k', 0, 1000, 0);
    expect(engine.acquire(owner, 'k', 0, 1000, 1)).toBe('timeout');
    expect(engine.acquire(owner, 'k', 1000, 1000, 2)).toBeInstanceOf(Waiter);
    expect(engine.acquire(owner, 'k', 1000, 1000, 3)).toBe('busy');
    expect(engine.acquire(owner, 'other', 0, 1000, 4)).toBe('busy'); // max-locks
  });

  it('does not count a hand-off against max-locks', () => {
    const { engine, owner, log } = setup({ maxLocks: 1, maxWaitersPerKey: 5, maxWaiters: 5 });
    engine.acquire(owner, 'k', 0, 1000, 0);
    engine.acquire(owner, 'k', 5000, 1000, 1);
    engine.release('k', 10n);
    expect(log).toEqual(['A 11 k @0']);
  });

  it('releases a grant whose owner is gone at once and passes the lock on (no ghost lock)', () => {
    const { engine, owner, log } = setup();
    const gone: WaiterOwner = { granted: () => false, timedOut: () => {} };
    engine.acquire(owner, 'k', 0, 1000, 0);
    engine.acquire(gone, 'k', 5000, 1000, 1);
    engine.acquire(owner, 'k', 5000, 1000, 2);
    engine.release('k', 10n);
    expect(log).toEqual(['A 12 k @0']);
    expect(engine.stats.ghostReleases).toBe(1);
    expect(engine.heldCount).toBe(1);
  });

  it('stop() answers every waiter T and refuses new work', () => {
    const { engine, owner, log } = setup();
    engine.acquire(owner, 'k', 0, 1000, 0);
    engine.acquire(owner, 'k', 5000, 1000, 1);
    engine.acquire(owner, 'j', 0, 1000, 2);
    engine.acquire(owner, 'j', 5000, 1000, 3);
    engine.stop();
    expect(log).toEqual(['T k @0', 'T j @0']);
    expect(engine.waitingCount).toBe(0);
    expect(engine.acquire(owner, 'z', 0, 1000, 4)).toBe('busy');
  });

  it('asks the token guard before every grant and grants nothing it refuses', () => {
    const clock = new ManualClock(0);
    let allow = true;
    const owner: WaiterOwner = { granted: () => true, timedOut: () => {} };
    const engine = serving(new LockEngine(clock, { maxLocks: 9, maxWaitersPerKey: 9, maxWaiters: 9 }), 1n, () => allow);
    expect(engine.acquire(owner, 'a', 0, 1000, 0)).toBe(1n);
    allow = false;
    expect(engine.acquire(owner, 'b', 0, 1000, 1)).toBe('busy');
    expect(engine.heldCount).toBe(1);
  });

  it('wakes from a pause longer than its timer wheel spans and fires nothing an earlier firing already settled (sim seed 38, a time warp)', () => {
    // A lease end and a wait end both fell due while the process was stopped: the lease end's hand-off
    // settles the waiter, whose own wait end must then not fire (it crashed the node: the waiter's
    // queue was gone).
    const clock = new ManualClock(1_000_000);
    const outcomes: string[] = [];
    const owner: WaiterOwner = { granted: (w, token) => (outcomes.push(`${String(w.tag)} granted ${token}`), true), timedOut: (w) => void outcomes.push(`${String(w.tag)} timed out`) };
    const engine = serving(new LockEngine(clock, { maxLocks: 9, maxWaitersPerKey: 9, maxWaiters: 9 }), 1n);
    expect(engine.acquire(owner, 'k', 0, 1_000, 'first')).toBe(1n);
    expect(engine.acquire(owner, 'k', 2_000, 1_000, 'second')).toBeInstanceOf(Waiter);
    clock.jump(10 * 60_000); // more than the wheel's 2^15 ticks of 10 ms
    expect(outcomes).toEqual(['second timed out']);
    expect(engine.heldCount).toBe(0);
    expect(engine.waitingCount).toBe(0);
  });

  it('answers T, not a grant, to a waiter whose wait ran out while the node did not run (a stopped process)', () => {
    // The lease ended before the wait, but both while the process was stopped: a grant now would
    // reach a client that stopped waiting long ago, with a lease it counts from its request.
    const clock = new ManualClock(1_000_000);
    const outcomes: string[] = [];
    const owner: WaiterOwner = { granted: (w, token) => (outcomes.push(`${String(w.tag)} granted ${token}`), true), timedOut: (w) => void outcomes.push(`${String(w.tag)} timed out`) };
    const engine = serving(new LockEngine(clock, { maxLocks: 9, maxWaitersPerKey: 9, maxWaiters: 9 }), 1n);
    expect(engine.acquire(owner, 'k', 0, 1_000, 'first')).toBe(1n);
    engine.acquire(owner, 'k', 2_000, 1_000, 'late');
    engine.acquire(owner, 'k', 10_000, 1_000, 'patient');
    clock.jump(3_000); // within the wheel: the ticks since are walked one by one
    // The one still waiting gets the key; the one whose wait ran out gets T.
    expect(outcomes).toEqual(['late timed out', 'patient granted 2']);
    // A release hands the key on at once as before, to a waiter whose wait has not run out.
    engine.acquire(owner, 'k', 5_000, 1_000, 'next');
    expect(engine.release('k', 2n)).toBe(true);
    expect(outcomes.at(-1)).toBe('next granted 3');
  });

  it('serves again after a year as a follower without catching up its timer wheel 10 ms at a time (issue 27, D-3)', () => {
    const clock = new ManualClock(1_000_000);
    const owner: WaiterOwner = { granted: () => true, timedOut: () => {} };
    // What the wheel reports it looked at (the simulator's CPU model charges 2 ns a slot).
    let spentNs = 0;
    const engine = serving(new LockEngine(clock, { maxLocks: 9, maxWaitersPerKey: 9, maxWaiters: 9 }, { spend: (ns) => (spentNs += ns) }), 1n);
    engine.stop(); // stands by: the wheel is idle from here
    clock.advance(365 * 24 * 3600 * 1000);
    const table = new LockTable(1n, engine.records);
    table.apply({ type: 'grant', key: 'held', leaseMs: 5_000 });
    engine.serve(new LocalLog(table));
    clock.advance(10); // the first tick after taking over
    engine.acquire(owner, 'k', 0, 1000, 0);
    // One pass over the 2^15 slots, not the 3.2 billion ticks of a year (6.5 s of stall).
    expect(spentNs).toBeLessThanOrEqual(2 * 2 * 2 ** 15);
    expect(engine.heldCount).toBe(2);
    clock.advance(2_000);
    expect(engine.heldCount).toBe(1); // k's 1 s lease ended on time, held's 5 s one runs on
    clock.advance(3_000);
    expect(engine.heldCount).toBe(0);
  });
});
