/**
 * What a priority cluster promises (docs/cluster.md), checked after every
 * event of a priority seed, beside the shared end-of-run checks:
 *
 * - **Token order**, as grants complete: a grant asked for after another
 *   grant's reply carries a larger token, except where two nodes served at
 *   once or a partition separated the two grants' nodes (the `excused` rule
 *   of simulation.ts). A clock beyond the bound excuses only what no node
 *   can know: the order after tokens its node issued while it was off, and
 *   a smaller token from a node whose clock ran behind and which could not
 *   hear the other since its grant. Everything else the nodes must refuse.
 * - **Two actives**: once the cluster is whole again (every running node
 *   reaches every other, none paused), two serving nodes may coexist for a
 *   heartbeat exchange, not for two failover timeouts. A node with a
 *   mistaken configuration counts as failed there, so it is checked on its
 *   own: it must not serve beside a node of its own peers list that it
 *   reaches (that node refuses its link: it never promotes past it, or steps
 *   back once it dials it).
 * - **A resumed active grants nothing beside its successor**: an active
 *   paused (SIGSTOP) while another node took over with a table that beats
 *   its own must not grant, after it resumes, while that successor serves,
 *   unless a partition kept them apart (it must hear its peers first, then
 *   step back; docs/cluster.md: never both granting). Nothing here depends
 *   on a client colliding with the other's grant, or on sync-standbys.
 * - **Availability**: a cluster whose running nodes are whole, correctly
 *   configured and within the clock bound has a serving node after a while.
 * - **Take-overs keep what was acknowledged**: a node that starts serving
 *   (promoted, or handed the role) holds every raw client's current hold in
 *   its table, token and lease end, unless more than N nodes failed since
 *   the hold began: the loss table below, checked on the table itself rather
 *   than only when a later client happens to collide with the lost grant.
 * - **The loss table**, at the end: with `sync-standbys N`, no client is
 *   granted a key another client still holds by an acknowledged grant,
 *   unless more than N nodes failed (were down, paused, cut off, or a node
 *   with a mistaken configuration served) between the two grants; with N = 0
 *   the same holds when no node failed at all. And no grant reaches its
 *   client after its lease ended (a stall answers T instead).
 */
import type { Operation } from '@ticketing/checker';
import { dominates, type Claim } from '@ticketing/server';
import type { Grant, Hold } from './client-checks.js';
import type { SimMachine } from './machine.js';
import type { PriorityFaults } from './priority-faults.js';
import type { Scheduler } from './scheduler.js';
import type { SimNetwork } from './sim-network.js';

export interface PriorityCheckOptions {
  readonly failoverTimeoutMs: number;
  readonly heartbeatMs: number;
  readonly clockBoundMs: number;
  readonly syncStandbys: number;
  /** The shared token-order exemption (simulation.ts). */
  readonly excused: (a: Grant, b: Grant) => boolean;
  /** What the clients believe they hold so far (workload.ts). */
  readonly holds: () => readonly Hold[];
}

type Spans = Array<[number, number]>;

function mark(spans: Spans, holds: boolean, now: number): void {
  const open = spans.at(-1);
  if (holds && (open === undefined || open[1] !== Infinity)) spans.push([now, Infinity]);
  if (!holds && open !== undefined && open[1] === Infinity) open[1] = now;
}

function overlaps(spans: Spans, from: number, to: number): boolean {
  return spans.some(([a, b]) => a <= to && b >= from);
}

/** When a hold surely ends by real time: its end less what a fast crystal takes off it. */
function surelyEnds(h: Hold): number {
  return h.to - RATE_ALLOWANCE * (h.to - h.from);
}

/** A grant's reply may reach its client this long after its lease at most (the sweep, the network). */
const LATE_SLACK_MS = 100;
/** Clock-rate error of the simulated crystals (1%), and a little more: holds end this fraction early. */
const RATE_ALLOWANCE = 0.011;
/** A take-over's table is checked only for holds with more than this long left (the sweep, a reply in flight). */
const TAKEOVER_SLACK_MS = 50;
/** After any clock beyond the bound, the availability check waits this long (nodes remember offsets). */
const CLOCK_TROUBLE_MS = 10_000;
/**
 * After a partition heals, links must come up again before two actives can
 * hear each other: a dial in flight is given up after 1 s and the next one
 * follows within 0.8 s (peers/peer-mesh.ts).
 */
export const RELINK_MS = 1_800;

export class PriorityChecks {
  /** Per machine: when it was failed (down, paused, cut off from another node, misconfigured). */
  private readonly failed = new Map<string, Spans>();
  /** Per machine: when it held client requests unread (a hand-off, deciding, after a pause). */
  private readonly holding = new Map<string, Spans>();
  /** Per machine: when its wall clock was off real time by more than half the bound (beyond the bound from another's). */
  private readonly offClock = new Map<string, Spans>();
  /** Per pair of machines (names in order, `a>b`): when they could hear each other (both up and running, linked, configured alike). */
  private readonly linked = new Map<string, Spans>();
  /** When two or more nodes served clients at once. */
  readonly twoServing: Spans = [];
  /** When a node running with a mistaken configuration served (alone: its peers down); what it granted is lost when it is fixed. */
  private readonly mistakenServing: Spans = [];
  /** Per machine: when it served clients. */
  private readonly servedSpans = new Map<string, Spans>();
  /** Per machine: its pauses, each with its process, whether it served, and the next token its table held when it resumed. */
  private readonly pauses = new Map<string, Array<{ from: number; to: number; proc: unknown; serving: boolean; next: bigint | undefined; suspend: boolean; wallError: number; hidden: boolean }>>();
  /** Per "mistaken>other" pair: since when both have served while they reach each other. */
  private readonly mistakenBeside = new Map<string, number>();
  /** Per ordered pair "a>b": when a partition (not a pause) kept `a`'s bytes from `b`. */
  private readonly cut = new Map<string, Spans>();
  private resumedChecked = 0;
  /** The scheduler's warps seen so far (scheduler.ts): after one the cluster starts over, as after a pause of every node. */
  private warpedSeen = 0;
  private wholeSince: number | undefined;
  private unservedSince: number | undefined;
  private lastBadClock = -Infinity;
  /** Per machine: when its wall clock was last beyond half the bound, and when it last went down. */
  private readonly badClockAt = new Map<string, number>();
  private readonly downSince = new Map<string, number>();
  private readonly upSince = new Map<string, number>();
  private checked = 0;
  private readonly grants: Grant[] = [];
  /** Who served at the last event (a change goes into the trace). */
  private wasServing = new Set<string>();
  /**
   * Who answered clients at the last event: serving, not holding them (a
   * change is a take-over). A pause is not one: a resumed active answers
   * nothing before it has heard its peers (role-machine.ts).
   */
  private wasAnswering = new Set<string>();

  constructor(
    private readonly sched: Scheduler,
    private readonly net: SimNetwork,
    private readonly machines: readonly SimMachine[],
    private readonly faults: PriorityFaults,
    private readonly o: PriorityCheckOptions,
  ) {
    for (const m of machines) {
      this.failed.set(m.name, []);
      this.holding.set(m.name, []);
      this.offClock.set(m.name, []);
      this.servedSpans.set(m.name, []);
      this.pauses.set(m.name, []);
    }
  }

  private serving(m: SimMachine): boolean {
    return m.state === 'up' && m.node !== undefined && m.node.role === 'active' && m.node.redirectTarget() === undefined;
  }

  /**
   * Down, paused, misconfigured, stopping, or cut off from any running node:
   * a partition fails every node it cuts (docs/cluster.md admits losing what
   * the side with the older epoch granted during the split).
   */
  private isFailed(m: SimMachine): boolean {
    if (m.state !== 'up' || m.clock.isPaused || this.faults.misconfigured.has(m.name) || m.node?.role === 'stopping') return true;
    return this.machines.some((x) => x !== m && x.state === 'up' && (!this.net.reaches(m.name, x.name) || !this.net.reaches(x.name, m.name)));
  }

  /**
   * For the loss table, a node that lost its copy of the table (it restarted)
   * stays failed until it follows an active again: a copy it does not hold
   * cannot save an acknowledged grant.
   */
  private lostItsCopy(m: SimMachine): boolean {
    return m.state === 'up' && m.node?.status().priority?.role === 'starting';
  }

  private canHear(x: SimMachine, y: SimMachine): boolean {
    const running = (m: SimMachine) => m.state === 'up' && !m.clock.isPaused && !this.faults.misconfigured.has(m.name);
    return running(x) && running(y) && this.net.reaches(x.name, y.name) && this.net.reaches(y.name, x.name);
  }

  /**
   * `x` and `y` could hear each other long enough for a heartbeat (and its
   * tokens) to cross some time within [from, to]: a link coming up needs up
   * to RELINK_MS.
   */
  couldHear(x: string, y: string, from: number, to: number): boolean {
    const spans = this.linked.get([x, y].sort().join('>')) ?? [];
    return spans.some(([a, b]) => Math.min(b, to) - Math.max(a, from) >= RELINK_MS);
  }

  /** Runs after every event; returns what failed, if anything. */
  afterEvent(history: readonly Operation[]): string | undefined {
    const now = this.sched.now;
    const T = this.o.failoverTimeoutMs;
    const switched = this.faults.switchedAt !== undefined;
    for (const x of this.machines) {
      for (const y of this.machines) {
        if (x.name >= y.name) continue;
        const key = `${x.name}>${y.name}`;
        const spans = this.linked.get(key) ?? (this.linked.set(key, []).get(key)!);
        mark(spans, this.canHear(x, y), now);
      }
    }
    if (this.sched.warped !== this.warpedSeen) {
      // Every clock jumped ahead and nothing ran meanwhile: whatever the rules give time to settle
      // (two actives, availability, a node just up) is given that time again from now.
      this.warpedSeen = this.sched.warped;
      this.wholeSince = undefined;
      this.unservedSince = undefined;
      this.mistakenBeside.clear();
      for (const m of this.machines) if (this.upSince.has(m.name)) this.upSince.set(m.name, now);
    }
    const failed = new Set(this.machines.filter((m) => this.isFailed(m)).map((m) => m.name));
    for (const m of this.machines) {
      mark(this.failed.get(m.name)!, failed.has(m.name) || (!switched && this.lostItsCopy(m)), now);
      mark(this.holding.get(m.name)!, m.state === 'up' && m.node?.clientsHeld() === true, now);
      const off = Math.abs(m.clock.wallErrorMs) > this.o.clockBoundMs / 2;
      mark(this.offClock.get(m.name)!, off, now);
      if (off) {
        this.lastBadClock = now;
        this.badClockAt.set(m.name, now);
      }
      if (m.state === 'up') {
        this.downSince.delete(m.name);
        if (!this.upSince.has(m.name)) this.upSince.set(m.name, now);
      } else {
        this.upSince.delete(m.name);
        if (!this.downSince.has(m.name)) this.downSince.set(m.name, now);
      }
    }
    const servers = this.machines.filter((m) => this.serving(m));
    const serving = servers.length;
    for (const m of this.machines) {
      const now_ = servers.includes(m);
      if (now_ === this.wasServing.has(m.name)) continue;
      if (now_) this.wasServing.add(m.name);
      else this.wasServing.delete(m.name);
      this.sched.note(`${m.name}: ${now_ ? `serves clients (epoch ${m.node?.status().priority?.epoch ?? '?'})` : 'no longer serves clients'}`);
    }
    for (const m of this.machines) mark(this.servedSpans.get(m.name)!, servers.includes(m), now);
    this.notePauses(servers);
    const tookOver = this.checkTakeOvers(servers, failed);
    if (tookOver !== undefined) return tookOver;
    const beside = this.checkMistakenBeside(servers);
    if (beside !== undefined) return beside;
    const resumed = this.checkResumedGrants(history);
    if (resumed !== undefined) return resumed;
    mark(this.twoServing, serving >= 2, now);
    mark(this.mistakenServing, servers.some((m) => this.faults.misconfigured.has(m.name)), now);
    if (switched) return this.checkTokens(history);

    const up = this.machines.filter((m) => m.state === 'up');
    const whole = up.length > 0 && up.every((m) => !failed.has(m.name));
    if (!whole) this.wholeSince = undefined;
    else this.wholeSince ??= now;

    if (serving >= 2 && this.wholeSince !== undefined) {
      const coexist = now - Math.max(this.wholeSince, this.twoServing.at(-1)![0]);
      if (coexist > 2 * T + RELINK_MS) {
        return `two actives: ${servers.map((m) => m.name).join(' and ')} have served clients together for ${Math.round(coexist)} ms while the cluster was whole (at most ${2 * T + RELINK_MS} ms: links up again, then two failover timeouts)`;
      }
    }

    // Availability: nothing prevents a serving node, for long enough.
    const troubled = now - this.lastBadClock < CLOCK_TROUBLE_MS || this.machines.some((m) => m.state !== 'up' && (this.badClockAt.get(m.name) ?? -Infinity) >= (this.downSince.get(m.name) ?? now) - CLOCK_TROUBLE_MS);
    const settled = whole && !troubled && up.every((m) => now - this.upSince.get(m.name)! > 2 * T);
    if (serving > 0 || !settled) this.unservedSince = undefined;
    else this.unservedSince ??= now;
    const limit = Math.max(6 * T, 2_000 + 2 * T);
    if (this.unservedSince !== undefined && now - this.unservedSince > limit) {
      const why = up.map((m) => `${m.name}: ${m.node?.status().priority?.notPromotingBecause ?? m.node?.status().priority?.role ?? '?'}`).join('; ');
      return `availability: no node has served for ${Math.round(now - this.unservedSince)} ms although every running node is reachable, correctly configured and within the clock bound (${why})`;
    }
    return this.checkTokens(history);
  }

  /** Pauses as they begin and end, and partitions (cuts that are no pause) between every two machines. */
  private notePauses(servers: readonly SimMachine[]): void {
    const now = this.sched.now;
    for (const m of this.machines) {
      const list = this.pauses.get(m.name)!;
      const open = list.at(-1);
      if (m.clock.isPaused && (open === undefined || open.to !== Infinity)) {
        list.push({ from: now, to: Infinity, proc: m.proc, serving: servers.includes(m), next: undefined, suspend: m.clock.monotonicStopped, wallError: m.clock.wallErrorMs, hidden: false });
      }
      if (!m.clock.isPaused && open !== undefined && open.to === Infinity) {
        open.to = now;
        // An OS suspend (its monotonic clock stopped) through which its wall clock was also stepped
        // back: what the node can read of the gap (wall against monotonic time) is the suspension
        // less the step, and below its pause threshold nothing in the process shows it was away.
        const seen = now - open.from + (m.clock.wallErrorMs - open.wallError);
        open.hidden = open.suspend && m.clock.wallErrorMs < open.wallError && seen <= this.o.failoverTimeoutMs - this.o.heartbeatMs;
        // The same process, woken up (a start after a kill resumes the clock too: that is no resume).
        if (m.proc !== undefined && m.proc === open.proc) open.next = m.node?.lockTable()?.nextToken;
      }
      for (const x of this.machines) {
        if (x === m) continue;
        const key = `${m.name}>${x.name}`;
        const spans = this.cut.get(key) ?? (this.cut.set(key, []).get(key)!);
        mark(spans, this.net.cut(m.name, x.name), now);
      }
    }
  }

  /**
   * A node with a mistaken configuration that serves beside a serving node
   * of its own peers list, the two reaching each other: its dial is refused,
   * so it never promotes past that node (or, having served alone while its
   * peers were down, steps back once it dials one). Allowed as long as two
   * actives of one configuration are (links up again, two failover timeouts).
   */
  private checkMistakenBeside(servers: readonly SimMachine[]): string | undefined {
    const now = this.sched.now;
    const T = this.o.failoverTimeoutMs;
    const seen = new Set<string>();
    const running = (m: SimMachine) => m.state === 'up' && !m.clock.isPaused && m.node?.role !== 'stopping';
    for (const m of servers) {
      if (!this.faults.misconfigured.has(m.name) || !running(m)) continue;
      const listed = m.config().peers;
      for (const x of servers) {
        if (x === m || this.faults.misconfigured.has(x.name) || !running(x)) continue;
        if (!listed.some((p) => p.startsWith(`${x.nodeName}=`))) continue;
        if (!this.net.reaches(m.name, x.name) || !this.net.reaches(x.name, m.name)) continue;
        const key = `${m.name}>${x.name}`;
        seen.add(key);
        const since = this.mistakenBeside.get(key) ?? (this.mistakenBeside.set(key, now).get(key)!);
        if (now - since > 2 * T + RELINK_MS) {
          return `two actives: ${m.name}, running with a mistaken configuration (${JSON.stringify(m.overrides)}), has served clients beside ${x.name} for ${Math.round(now - since)} ms though the two reach each other (at most ${2 * T + RELINK_MS} ms: ${x.name} refuses its link, so it must not promote past it)`;
        }
      }
    }
    for (const key of [...this.mistakenBeside.keys()]) if (!seen.has(key)) this.mistakenBeside.delete(key);
    return undefined;
  }

  /**
   * Grants completed since the last call by an active after it resumed from
   * a pause (serving throughout), while a node that started serving during
   * the pause, on a table that beats the resumed one's, still serves: the
   * resumed node must hold its clients until it has heard every peer, and
   * then step back to the newer active. Excused only by a partition between
   * the two since the pause began (the resumed node may then find the other
   * gone), a mistaken configuration, a token that more than one node's
   * residue could have issued, or an OS suspend hidden by a step back of the
   * node's wall clock (notePauses: docs/cluster.md admits it).
   */
  private checkResumedGrants(history: readonly Operation[]): string | undefined {
    const switchedAt = this.faults.switchedAt ?? Infinity;
    for (; this.resumedChecked < history.length; this.resumedChecked++) {
      const b = history[this.resumedChecked]!;
      if (b.op !== 'acquire' || b.outcome !== 'granted' || b.invokedAt >= switchedAt) continue;
      const granters = this.granters(b.token);
      if (granters.length !== 1) continue;
      const x = granters[0]!;
      const c = b.completedAt!;
      if (this.faults.misconfigured.has(x.name)) continue;
      for (const p of this.pauses.get(x.name)!) {
        if (!p.serving || p.next === undefined || p.to > c || b.token < p.next || p.hidden) continue;
        // Serving from before the pause until the grant, without a step back between.
        if (!this.servedSpans.get(x.name)!.some(([s, e]) => s <= p.from && e >= c)) continue;
        for (const y of this.machines) {
          if (y === x || this.faults.misconfigured.has(y.name)) continue;
          // Serving since some time in the pause, and still when the grant reached its client.
          const stint = this.servedSpans.get(y.name)!.find(([s, e]) => s > p.from && s < p.to && e >= c);
          if (stint === undefined || !this.beats(y, x)) continue;
          const apart = [`${x.name}>${y.name}`, `${y.name}>${x.name}`].some((k) => overlaps(this.cut.get(k) ?? [], p.from - RELINK_MS, c));
          if (apart) continue;
          return `a resumed node granted beside its successor: ${x.name} was paused from ${p.from.toFixed(1)} to ${p.to.toFixed(1)} ms, ${y.name} serves since ${stint[0].toFixed(1)} ms, and ${x.name} granted ${b.key} to ${b.client} (token ${b.token}) at ${c.toFixed(1)} ms, before it had heard its peers (no partition between the two since the pause)`;
        }
      }
    }
    return undefined;
  }

  /** `y`'s table beats `x`'s as the role machines order them (established first, then the newer epoch; positions left out). */
  private beats(y: SimMachine, x: SimMachine): boolean {
    const claim = (m: SimMachine): Claim | undefined => {
      const st = m.node?.status();
      const epoch = st?.priority?.epoch;
      return epoch === undefined ? undefined : { epoch: BigInt(epoch), established: st?.replication?.tableConfirmed === true, position: 0 };
    };
    return dominates(claim(y), claim(x));
  }

  /**
   * Every node that starts answering clients now holds the raw clients'
   * current holds (the loss table's rule). One that is itself failed (cut
   * off, without its copy) is one of the failures: what it may grant is the
   * end-of-run check's.
   */
  private checkTakeOvers(servers: readonly SimMachine[], failed: ReadonlySet<string>): string | undefined {
    const answering = servers.filter((m) => m.node?.clientsHeld() !== true);
    const fresh = answering.filter((m) => !this.wasAnswering.has(m.name));
    this.wasAnswering = new Set(answering.map((m) => m.name));
    if (fresh.length === 0 || this.faults.switchedAt !== undefined) return undefined;
    const holds = this.o.holds();
    for (const m of fresh) {
      if (failed.has(m.name) || this.lostItsCopy(m)) continue;
      const lost = this.lostOnTakeOver(m, holds);
      if (lost !== undefined) return lost;
    }
    return undefined;
  }

  private lostOnTakeOver(m: SimMachine, holds: readonly Hold[]): string | undefined {
    const table = m.node?.lockTable();
    if (table === undefined) return undefined;
    const now = this.sched.now;
    for (const h of holds) {
      if (h.to === Infinity || h.from > now) continue; // a library ticket's end is its own signal: the end-of-run check sees it
      const to = surelyEnds(h);
      if (to - now <= TAKEOVER_SLACK_MS) continue;
      const failures = this.unexcusedFailures(h.from, now);
      if (failures === undefined) continue;
      const record = table.get(h.key);
      const leftMs = record === undefined ? 0 : (record.due - m.clock.now()) / m.clock.rate;
      if (record?.token === h.token && leftMs >= to - now - TAKEOVER_SLACK_MS) continue;
      const has = record === undefined ? 'no lock on it' : record.token === h.token ? `its lease ending in ${Math.round(leftMs)} ms` : `token ${record.token}`;
      return `lost acknowledged write (sync-standbys ${this.o.syncStandbys}, ${failures} node failure${failures === 1 ? '' : 's'} since the hold began): ${m.name} took over at ${now.toFixed(1)} ms with ${has} for ${h.key}, which ${h.client} holds (token ${h.token}) from ${h.from.toFixed(1)} until ${to.toFixed(1)} ms`;
    }
    return undefined;
  }

  /** Token order over the grants completed since the last call. */
  private checkTokens(history: readonly Operation[]): string | undefined {
    for (; this.checked < history.length; this.checked++) {
      const b = history[this.checked]!;
      if (b.op !== 'acquire' || b.outcome !== 'granted') continue;
      for (const a of this.grants) {
        if (a.token === b.token) return `tokens: token ${b.token} was granted twice: to ${a.client} for ${a.key} and to ${b.client} for ${b.key}`;
        if (a.completedAt! < b.invokedAt && b.token < a.token && !this.o.excused(a, b)) {
          return `tokens: ${b.client} was granted ${b.key} with token ${b.token} at ${b.completedAt!.toFixed(1)} ms, below token ${a.token} granted to ${a.client} for ${a.key} before it asked (${a.completedAt!.toFixed(1)} < ${b.invokedAt.toFixed(1)} ms)`;
        }
      }
      this.grants.push(b);
    }
    return undefined;
  }

  /**
   * `name`'s clock was beyond the bound at `t`: the tokens it issued then ran
   * that far ahead of the others' clocks, so a node that never heard them (a
   * partition, the first leader after a move to Raft) may issue smaller ones
   * (docs/cluster.md: keep clocks within the bound; the nodes refuse to take
   * over, not to serve on).
   */
  wasOffClock(name: string, t: number): boolean {
    return overlaps(this.offClock.get(name) ?? [], t - this.o.failoverTimeoutMs, t);
  }

  /**
   * The loss table's rule for a hold that began at `from` and was lost by
   * `until` (another grant, a take-over without it): the node failures
   * meanwhile, or undefined when they excuse the loss (more than
   * sync-standbys, or a node with a mistaken configuration served).
   */
  private unexcusedFailures(from: number, until: number): number | undefined {
    const T = this.o.failoverTimeoutMs;
    if (overlaps(this.mistakenServing, from - T, until)) return undefined;
    // A partition's effects last until the links are up again and a heartbeat has crossed.
    const failures = this.failuresWithin(from - T - RELINK_MS, until);
    return failures > this.o.syncStandbys ? undefined : failures;
  }

  /** Most machines failed at once within [from, to]. */
  private failuresWithin(from: number, to: number): number {
    const edges: Array<[number, number]> = [];
    for (const spans of this.failed.values()) {
      for (const [a, b] of spans) if (a <= to && b >= from) edges.push([Math.max(a, from), 1], [Math.min(b, to), -1]);
    }
    edges.sort((x, y) => x[0] - y[0] || y[1] - x[1]);
    let n = 0;
    let most = 0;
    for (const [, d] of edges) most = Math.max(most, (n += d));
    return most;
  }

  /**
   * The machines that may have granted a priority token: its residue modulo
   * 16 is the node's index in its peers list, which a mistaken list can make
   * another node's too.
   */
  granters(token: bigint): SimMachine[] {
    return this.machines.filter((m) => m.indexes.has(Number(token % 16n)));
  }

  /** The end-of-run checks: late grants and the loss table. */
  atEnd(history: readonly Operation[], holds: readonly Hold[]): string | undefined {
    const switchedAt = this.faults.switchedAt ?? Infinity;
    for (const op of history) {
      if (op.op !== 'acquire' || op.outcome !== 'granted' || op.invokedAt >= switchedAt) continue;
      // Granted at the latest when its wait ran out: its lease ended by then plus the lease. A warp
      // between the two is no time: nothing ran (a reply it caught on its way arrives after it).
      const stood = this.sched.warps.reduce((sum, [from, to]) => sum + (from >= op.invokedAt && to <= op.completedAt! ? to - from : 0), 0);
      const late = op.completedAt! - op.invokedAt - stood - op.waitMs - op.leaseMs;
      if (late <= LATE_SLACK_MS) continue;
      // A node cut off or paused holds its replies too; one that held its clients read the request late.
      if (this.granters(op.token).some((g) => overlaps(this.failed.get(g.name)!, op.invokedAt, op.completedAt!) || overlaps(this.holding.get(g.name)!, op.invokedAt, op.completedAt!))) continue;
      return `late grant: ${op.client} was granted ${op.key} (token ${op.token}, wait ${op.waitMs} ms, lease ${op.leaseMs} ms) at least ${Math.round(late)} ms after its lease ended (asked at ${op.invokedAt.toFixed(1)}, answered at ${op.completedAt!.toFixed(1)} ms)`;
    }
    const byKey = new Map<string, Hold[]>();
    for (const h of holds) {
      const to = surelyEnds(h);
      if (to > h.from && h.from < switchedAt) (byKey.get(h.key) ?? byKey.set(h.key, []).get(h.key)!).push({ ...h, to });
    }
    for (const [key, list] of byKey) {
      list.sort((x, y) => x.from - y.from);
      for (let i = 0; i < list.length; i++) {
        const a = list[i]!;
        for (let j = i + 1; j < list.length && list[j]!.from < a.to; j++) {
          const b = list[j]!;
          if (b.token === a.token) continue;
          const failures = this.unexcusedFailures(a.from, b.from);
          if (failures === undefined) continue;
          return `lost acknowledged grant (sync-standbys ${this.o.syncStandbys}, ${failures} node failure${failures === 1 ? '' : 's'} meanwhile): ${a.client} held ${key} (token ${a.token}) from ${a.from.toFixed(1)} to ${a.to.toFixed(1)} ms, and ${b.client} was granted it (token ${b.token}) at ${b.from.toFixed(1)} ms`;
        }
      }
    }
    return undefined;
  }
}
