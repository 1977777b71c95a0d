/**
 * The simulation's only source of time and order: a discrete-event queue
 * over virtual milliseconds, and one seeded generator for every random
 * choice. Events at the same time run in the order they were scheduled, so
 * a seed replays exactly.
 */
import { seededRandom } from '@ticketing/checker';

export interface Event {
  readonly at: number;
  readonly seq: number;
  readonly fn: () => void;
  /** For the trace of a failing seed. */
  readonly label: string;
  cancelled: boolean;
}

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
  'raft.snapshot.for-probe': 0.2,
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

  /** Runs `fn` `delay` ms from now (0: after everything already due now). */
  after(delay: number, label: string, fn: () => void): Event {
    const e: Event = { at: this.now + Math.max(0, delay), seq: this.seq++, fn, label, cancelled: false };
    this.queue.push(e);
    return e;
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
    for (;;) {
      if (stop?.() === true) return;
      let e = this.queue.pop();
      if (e === undefined) {
        // Continuations still queued (a node starting up) may schedule more.
        await drainMicrotasks();
        e = this.queue.pop();
      }
      if (e === undefined) {
        if (Number.isFinite(until)) this.now = Math.max(this.now, until);
        return;
      }
      if (e.at > until) {
        this.queue.push(e);
        this.now = until;
        return;
      }
      if (e.cancelled) continue;
      this.now = e.at;
      this.steps++;
      this.note(e.label);
      try {
        e.fn();
      } catch (err) {
        // In a real process this would be an uncaught exception: the process dies. Here it is a finding.
        this.thrown = err as Error;
        this.note(`THREW: ${(err as Error).message}`);
        return;
      }
      await drainMicrotasks();
      if (this.thrown !== undefined || this.ownFailure !== undefined) return;
      afterEach?.();
    }
  }

  get pending(): number {
    return this.queue.size;
  }
}
