/**
 * The simulation's only source of time and order: a discrete-event queue
 * over virtual milliseconds, and one seeded generator for every random
 * choice. Events at the same time run in the order they were scheduled, so
 * a seed replays exactly.
 */
import { seededRandom } from '@ticketing/checker';

export interface Event {
  /** When it runs (later than asked when its host's CPU was busy: see CPU_COST). */
  at: number;
  seq: number;
  readonly fn: () => void;
  /** For the trace of a failing seed. */
  readonly label: string;
  /** The host whose code it runs: its CPU must be free, and the event's work keeps it busy. */
  readonly host: string | undefined;
  cancelled: boolean;
}

/**
 * The CPU cost model: what the code a host runs costs in simulated time, in
 * nanoseconds. Every event of a node's machine costs `event` (a turn of the
 * event loop), plus what it does on the way: bytes read and written on
 * sockets and disks, and work the node's code reports itself
 * (`Probes.spend`, for loops whose length does not show in any I/O, such as
 * a timer wheel catching up). A host whose CPU is busy runs its next event
 * only when the work before it is done, so a slow event delays everything
 * behind it on that host, as one event-loop thread does. Rough figures of
 * this project's server on a 2-core VM (docs/benchmarks.md); what matters
 * is that work takes time at all, so a stall shows.
 */
export const CPU_COST = {
  event: 2_000,
  socketRead: 3_000,
  socketWrite: 5_000,
  socketByte: 10,
  diskCall: 5_000,
  diskByte: 1,
} as const;

/**
 * One event that keeps its host's event loop busy this long is a failure of
 * the node (FoundationDB's SlowTask): it answers nothing meanwhile, its
 * heartbeats stop, and its peers take it for dead (the simulated
 * failover-timeout is 200 ms). No bounded amount of a node's own work comes
 * near it in a simulation's small tables.
 */
export const SLOW_TASK_MS = 50;

/** A binary min-heap by (at, seq). */
class EventHeap {
  private readonly items: Event[] = [];

  get size(): number {
    return this.items.length;
  }

  push(e: Event): void {
    const a = this.items;
    a.push(e);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(a[i]!, a[p]!)) break;
      [a[i], a[p]] = [a[p]!, a[i]!];
      i = p;
    }
  }

  pop(): Event | undefined {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (a.length > 0 && last !== undefined) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && before(a[l]!, a[m]!)) m = l;
        if (r < a.length && before(a[r]!, a[m]!)) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m]!, a[i]!];
        i = m;
      }
    }
    return top;
  }
}

function formatDuration(ms: number): string {
  if (ms >= 86_400_000) return `${(ms / 86_400_000).toFixed(1)} days`;
  if (ms >= 3_600_000) return `${(ms / 3_600_000).toFixed(1)} hours`;
  return `${(ms / 1000).toFixed(1)} s`;
}

/** Resolves once every promise continuation queued so far (and those they queue) has run. */
export async function drainMicrotasks(): Promise<void> {
  await new Promise<void>((resolve) => setImmediate(resolve));
}

/** How often an enabled fault point fires when asked (points asked on every tick or loop pass fire rarely). */
const BUGGIFY_RATES: Readonly<Record<string, number>> = {
  'raft.snapshot.tiny-chunks': 1,
  'raft.append.few-entries': 1,
  'raft.transfer.now': 0.003,
  'raft.snapshot.now': 0.01,
  'raft.snapshot.over-suffix': 0.95,
};

function before(x: Event, y: Event): boolean {
  return x.at < y.at || (x.at === y.at && x.seq < y.seq);
}

export class Scheduler {
  /** Virtual milliseconds since the start of the run. */
  now = 0;
  /** Events run so far. */
  steps = 0;
  readonly random: () => number;
  private seq = 0;
  private readonly queue = new EventHeap();
  /** An exception an event threw (a node's code failed): the run stops there. */
  thrown: Error | undefined;
  /**
   * The first failure a node reported of its own code (an internal error, a
   * safety assertion, a node that stopped itself with no fault to explain it):
   * the run stops there, as for `thrown`.
   */
  ownFailure: string | undefined;

  /** Rare paths the nodes reached in this run, with how often (seams/environment.ts, Probes). */
  readonly coverage = new Map<string, number>();
  /** Fault points this seed enabled (decided the first time each is asked about). */
  private readonly points = new Map<string, boolean>();

  /**
   * A node's code asks whether fault point `point` fires now (FoundationDB's
   * BUGGIFY): each point is enabled in a quarter of the seeds, and an enabled
   * one fires at its own rate (BUGGIFY_RATES: once it is, a point that is
   * asked once per node, as at start, always fires).
   */
  buggify(point: string): boolean {
    let enabled = this.points.get(point);
    if (enabled === undefined) {
      enabled = this.chance(0.25);
      this.points.set(point, enabled);
      if (enabled) this.note(`fault point enabled: ${point}`);
    }
    return enabled && this.chance(BUGGIFY_RATES[point] ?? 0.05);
  }

  reached(path: string): void {
    this.coverage.set(path, (this.coverage.get(path) ?? 0) + 1);
  }

  /** A node's own failure (see ownFailure): the first one is kept, and the trace says so. */
  failedItself(why: string): void {
    this.note(`OWN FAILURE: ${why.split('\n')[0]}`);
    this.ownFailure ??= why;
  }
  /** The last events run, newest last: the trace a failing seed prints. */
  readonly recent: string[] = [];
  private readonly traceLength: number;

  constructor(
    readonly seed: number,
    traceLength = 200,
  ) {
    this.random = seededRandom(seed);
    this.traceLength = traceLength;
  }

  /**
   * Runs `fn` `delay` ms from now (0: after everything already due now); as
   * code of `host` when given, which costs that host CPU time when it has
   * one (see cpu).
   */
  after(delay: number, label: string, fn: () => void, host?: string): Event {
    const e: Event = { at: this.now + Math.max(0, delay), seq: this.seq++, fn, label, host, cancelled: false };
    this.queue.push(e);
    return e;
  }

  /** Hosts whose code costs CPU time (the machines that run nodes), and until when each is busy. */
  private readonly busyUntil = new Map<string, number>();
  /** The host whose event runs now, when it has a CPU: what is spent is charged to it. */
  private running: string | undefined;
  private spentNs = 0;
  /** The most one event of each host cost (ms), for the report. */
  readonly longestTask = new Map<string, { ms: number; label: string }>();

  /** `host`'s code costs CPU time from now on (CPU_COST). */
  cpu(host: string): void {
    if (!this.busyUntil.has(host)) this.busyUntil.set(host, -Infinity);
  }

  /** The running host's code did `ns` nanoseconds of work (nothing when no host with a CPU runs). */
  spend(ns: number): void {
    if (this.running !== undefined) this.spentNs += ns;
  }

  /** Simulated ms during which the world stood still and clocks ran (see warp), in all. */
  warped = 0;
  /** Each warp's [from, to] in simulated ms: nothing ran in between (the history check's standstills). */
  readonly warps: Array<[number, number]> = [];

  /**
   * Every clock jumps `ms` ahead at once and nothing runs in between: the
   * cluster and its clients idled through a long quiet stretch (or their
   * hosts were suspended together). Timers that fell due meanwhile fire
   * now, in order, as after a pause. A run's deadlines are in scenario time
   * (`scenarioNow`), which the warp does not move.
   */
  warp(ms: number): void {
    this.warps.push([this.now, this.now + ms]);
    for (const clock of this.warpWatchers) clock.beforeWarp();
    this.now += ms;
    this.warped += ms;
    for (const clock of this.warpWatchers) clock.afterWarp(ms);
    this.note(`time warp: every clock jumps ${formatDuration(ms)} ahead`);
  }

  /** Clocks that run through a warp their own way (sim-clock.ts). */
  private readonly warpWatchers = new Set<{ beforeWarp(): void; afterWarp(ms: number): void }>();

  watchWarps(clock: { beforeWarp(): void; afterWarp(ms: number): void }): void {
    this.warpWatchers.add(clock);
  }

  /** Simulated ms since the start, less the warps: what a run's deadlines count. */
  get scenarioNow(): number {
    return this.now - this.warped;
  }

  /** Records a line in the trace without scheduling anything. */
  note(line: string): void {
    this.recent.push(`${this.now.toFixed(3)} ${line}`);
    if (this.recent.length > this.traceLength) this.recent.shift();
  }

  /** A whole number in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.random() * (hi - lo + 1));
  }

  chance(p: number): boolean {
    return this.random() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.random() * items.length)]!;
  }

  /**
   * Runs events in order until `until` (virtual ms), `stop()` says so, or the
   * queue is empty. After each event every promise continuation it started
   * runs (the real node code is async) before `afterEach` (the safety checks)
   * and the next event: a setImmediate turn drains the microtask queue, and
   * nothing else in the process schedules real I/O or timers.
   */
  async run(until: number, afterEach?: () => void, stop?: () => boolean): Promise<void> {
    // `until` is scenario time: a warp during the run moves it along.
    const warpedBefore = this.warped;
    const end = () => until + (this.warped - warpedBefore);
    for (;;) {
      if (stop?.() === true) return;
      let e = this.queue.pop();
      if (e === undefined) {
        // Continuations still queued (a node starting up) may schedule more.
        await drainMicrotasks();
        e = this.queue.pop();
      }
      if (e === undefined) {
        if (Number.isFinite(until)) this.now = Math.max(this.now, end());
        return;
      }
      if (e.at > end()) {
        this.queue.push(e);
        this.now = Math.max(this.now, end());
        return;
      }
      if (e.cancelled) continue;
      // Events that fell due during a warp run now, in order.
      const start = Math.max(this.now, e.at);
      const busy = e.host === undefined ? undefined : this.busyUntil.get(e.host);
      if (busy !== undefined && busy > start) {
        // Its host is still busy with earlier work: it runs once that is done, after what waits already.
        e.at = busy;
        e.seq = this.seq++;
        this.queue.push(e);
        continue;
      }
      this.now = start;
      this.steps++;
      this.note(e.label);
      this.running = busy === undefined ? undefined : e.host;
      this.spentNs = CPU_COST.event;
      try {
        e.fn();
      } catch (err) {
        // In a real process this would be an uncaught exception: the process dies. Here it is a finding.
        this.thrown = err as Error;
        this.note(`THREW: ${(err as Error).message}`);
        return;
      }
      await drainMicrotasks();
      this.charge(e);
      if (this.thrown !== undefined || this.ownFailure !== undefined) return;
      afterEach?.();
    }
  }

  /** The event that just ran (and the continuations it started) kept its host busy for what it spent. */
  private charge(e: Event): void {
    const host = this.running;
    this.running = undefined;
    if (host === undefined) return;
    const ms = this.spentNs / 1e6;
    this.busyUntil.set(host, this.now + ms);
    const longest = this.longestTask.get(host);
    if (longest === undefined || ms > longest.ms) this.longestTask.set(host, { ms, label: e.label });
    if (ms > SLOW_TASK_MS) this.failedItself(`${host}: one event kept its event loop busy for ${ms.toFixed(1)} ms (${e.label}), more than ${SLOW_TASK_MS} ms: it answered nothing meanwhile`);
  }

  get pending(): number {
    return this.queue.size;
  }
}
