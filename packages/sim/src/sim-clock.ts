/**
 * One node's clocks in the simulation. Its monotonic time runs at `rate`
 * times the simulation's (a fast or slow crystal); its wall clock follows
 * real time off by an error that NTP keeps (rate and pauses do not move it,
 * as NTP's discipline would not let them) and that a step changes; the whole
 * process can be paused (SIGSTOP, a long GC): no timer of it fires while
 * paused, and the ones that fell due fire, in order, when it resumes. A
 * pause either freezes the monotonic clock too, or (as CLOCK_MONOTONIC does
 * through a real SIGSTOP) lets it run, so the process sees the gap.
 */
import type { Event, Scheduler } from './scheduler.js';

export interface SimTimer {
  readonly id: number;
}

interface Pending {
  event: Event | undefined;
  /** Local monotonic time it is due at. */
  due: number;
  fn: () => void;
  /** setInterval's period, local ms. */
  every: number | undefined;
  label: string;
}

export class SimClock {
  /** Local monotonic ms at the last rate change or pause boundary. */
  private baseLocal: number;
  /** Simulation ms at that moment. */
  private baseGlobal: number;
  private rateNow: number;
  private paused = false;
  /** Paused with the monotonic clock stopped too (see pause). */
  private frozen = false;
  /** How far the wall clock is from real time (ms). */
  private wallError: number;
  private readonly timers = new Map<number, Pending>();
  private nextId = 1;

  constructor(
    private readonly sched: Scheduler,
    readonly name: string,
    opts: { rate?: number; wallOffsetMs?: number; startLocal?: number } = {},
  ) {
    this.rateNow = opts.rate ?? 1;
    this.baseLocal = opts.startLocal ?? 1_000_000;
    this.baseGlobal = sched.now;
    this.wallError = opts.wallOffsetMs ?? 0;
    sched.watchWarps(this);
  }

  /**
   * A warp (scheduler.ts): over a stretch of days NTP disciplines the
   * monotonic clock's rate as well as the wall clock, so both move by the
   * stretch itself, not by the stretch times the crystal's error (0.5% of a
   * day would look like a 7-minute step of the wall clock against it).
   */
  beforeWarp(): void {
    this.rebase();
  }

  afterWarp(ms: number): void {
    if (!this.frozen) this.baseLocal += ms;
    this.baseGlobal += ms;
  }

  /** Monotonic milliseconds (performance.now() in a real process). */
  now(): number {
    return this.frozen ? this.baseLocal : this.baseLocal + (this.sched.now - this.baseGlobal) * this.rateNow;
  }

  /** Wall-clock milliseconds since the Unix epoch (Date.now()). */
  wallMs(): number {
    // The simulation starts at a fixed Unix time, so runs replay exactly.
    return SIM_EPOCH_MS + this.sched.now + this.wallError;
  }

  /** How far the wall clock is from real time now (ms; negative: behind). */
  get wallErrorMs(): number {
    return this.wallError;
  }

  get rate(): number {
    return this.rateNow;
  }

  /** The crystal runs at another speed from now on. */
  setRate(rate: number): void {
    this.rebase();
    this.rateNow = rate;
    this.rescheduleAll();
  }

  /** The wall clock jumps by `ms` (negative: backwards); monotonic time does not. */
  stepWall(ms: number): void {
    this.wallError += ms;
    this.sched.note(`${this.name}: wall clock stepped by ${ms} ms`);
  }

  /** `monotonicRuns`: the monotonic clock goes on meanwhile (a real SIGSTOP); else it stops too. */
  pause(monotonicRuns = false): void {
    if (this.paused) return;
    this.rebase();
    this.paused = true;
    this.frozen = !monotonicRuns;
    for (const t of this.timers.values()) if (t.event !== undefined) t.event.cancelled = true;
    this.sched.note(`${this.name}: paused`);
  }

  resume(): void {
    if (!this.paused) return;
    if (this.frozen) this.baseGlobal = this.sched.now;
    this.paused = false;
    this.frozen = false;
    this.sched.note(`${this.name}: resumed`);
    this.rescheduleAll();
  }

  get isPaused(): boolean {
    return this.paused;
  }

  /** Paused with the monotonic clock stopped too (an OS suspend). */
  get monotonicStopped(): boolean {
    return this.frozen;
  }

  setTimeout(fn: () => void, ms: number, label = 'timer'): SimTimer {
    return this.add(fn, Math.max(0, ms), undefined, label);
  }

  setInterval(fn: () => void, ms: number, label = 'interval'): SimTimer {
    return this.add(fn, Math.max(1, ms), Math.max(1, ms), label);
  }

  /** After everything already due: the next turn of this node's event loop. */
  setImmediate(fn: () => void, label = 'immediate'): SimTimer {
    return this.add(fn, 0, undefined, label);
  }

  clear(timer: SimTimer | undefined): void {
    if (timer === undefined) return;
    const t = this.timers.get(timer.id);
    if (t?.event !== undefined) t.event.cancelled = true;
    this.timers.delete(timer.id);
  }

  /** Drops every timer: the process died. */
  clearAll(): void {
    for (const t of this.timers.values()) if (t.event !== undefined) t.event.cancelled = true;
    this.timers.clear();
  }

  get pendingTimers(): number {
    return this.timers.size;
  }

  private add(fn: () => void, ms: number, every: number | undefined, label: string): SimTimer {
    const id = this.nextId++;
    const t: Pending = { event: undefined, due: this.now() + ms, fn, every, label };
    this.timers.set(id, t);
    this.arm(id, t);
    return { id };
  }

  private arm(id: number, t: Pending): void {
    if (this.paused) return;
    const globalDelay = Math.max(0, (t.due - this.now()) / this.rateNow);
    const fire = () => {
      if (this.timers.get(id) !== t) return;
      if (t.every === undefined) this.timers.delete(id);
      else {
        t.due = Math.max(t.due + t.every, this.now());
        this.arm(id, t);
      }
      t.fn();
    };
    // The node's own code: it runs on the machine's CPU (scheduler.ts, CPU_COST).
    t.event = this.sched.after(globalDelay, `${this.name}: ${t.label}`, fire, this.name);
  }

  private rebase(): void {
    this.baseLocal = this.now();
    this.baseGlobal = this.sched.now;
  }

  private rescheduleAll(): void {
    // In order of due time (then creation), so timers that fell due while paused fire in order.
    const all = [...this.timers].sort((a, b) => a[1].due - b[1].due || a[0] - b[0]);
    for (const [id, t] of all) {
      if (t.event !== undefined) t.event.cancelled = true;
      this.arm(id, t);
    }
  }
}

/** 2026-01-01T00:00:00Z: every simulation's wall clock starts here (plus each node's offset). */
export const SIM_EPOCH_MS = Date.UTC(2026, 0, 1);
