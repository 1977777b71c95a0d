/**
 * Time, injected: every module of the server reads time and sets timers only
 * through a Clock, so a test or a simulation can drive time by hand
 * (ManualClock) and the whole node runs deterministically. The real one is
 * system-clock.ts.
 */

export interface TimerHandle {
  cancel(): void;
}

export interface Clock {
  /** Monotonic milliseconds (never goes back; unrelated to wall time). */
  now(): number;
  /** Wall time: milliseconds since the Unix epoch (token floors, start time). */
  wallNow(): number;
  /** Calls `fn` once after `ms` (setTimeout); the handle cancels it. Never keeps the process alive on its own. */
  schedule(ms: number, fn: () => void): TimerHandle;
  /** Calls `fn` every `ms` (setInterval) until cancelled. */
  every(ms: number, fn: () => void): TimerHandle;
  /** Calls `fn` once after the I/O of this event-loop turn (setImmediate): batching point for writes. */
  soon(fn: () => void): void;
  /** Calls `fn` once as soon as the current operation has returned, before any I/O (process.nextTick). */
  defer(fn: () => void): void;
}

/**
 * A clock that moves only when told to; timers fire in time order as it
 * moves. `defer` and `soon` callbacks run at the next `advance` (or
 * `runSoon`), before any timer; deferred ones first.
 */
export class ManualClock implements Clock {
  private time: number;
  private readonly start: number;
  private seq = 0;
  private readonly timers = new Map<number, { at: number; fn: () => void; every: number }>();
  private pendingSoon: Array<() => void> = [];
  private pendingDefer: Array<() => void> = [];

  constructor(
    start = 1_000_000,
    /** Wall time (Unix ms) when the monotonic time is `start`. */
    private readonly wallAtStart = 1_750_000_000_000,
  ) {
    this.time = start;
    this.start = start;
  }

  now(): number {
    return this.time;
  }

  wallNow(): number {
    return this.wallAtStart + (this.time - this.start);
  }

  schedule(ms: number, fn: () => void): TimerHandle {
    return this.add(ms, fn, 0);
  }

  every(ms: number, fn: () => void): TimerHandle {
    return this.add(ms, fn, Math.max(1, ms));
  }

  soon(fn: () => void): void {
    this.pendingSoon.push(fn);
  }

  defer(fn: () => void): void {
    this.pendingDefer.push(fn);
  }

  /** Runs the `defer` and `soon` callbacks queued so far (and those they queue), deferred ones first. */
  runSoon(): void {
    while (this.pendingDefer.length > 0 || this.pendingSoon.length > 0) {
      const due = this.pendingDefer.length > 0 ? this.pendingDefer : this.pendingSoon;
      if (due === this.pendingDefer) this.pendingDefer = [];
      else this.pendingSoon = [];
      for (const fn of due) fn();
    }
  }

  private add(ms: number, fn: () => void, every: number): TimerHandle {
    const id = this.seq++;
    this.timers.set(id, { at: this.time + Math.max(0, ms), fn, every });
    return { cancel: () => this.timers.delete(id) };
  }

  /** Moves time forward by `ms`, firing due timers in order (each at its own time). */
  advance(ms: number): void {
    this.runSoon();
    const end = this.time + ms;
    for (;;) {
      let nextId = -1;
      let nextAt = Infinity;
      for (const [id, t] of this.timers) {
        if (t.at <= end && t.at < nextAt) {
          nextAt = t.at;
          nextId = id;
        }
      }
      if (nextId < 0) break;
      const t = this.timers.get(nextId)!;
      if (t.every > 0) t.at += t.every;
      else this.timers.delete(nextId);
      this.time = Math.max(this.time, nextAt);
      t.fn();
      this.runSoon();
    }
    this.time = end;
  }

  /**
   * The process was stopped for `ms` (SIGSTOP, a suspended VM): time moves
   * at once, then every timer that fell due meanwhile fires, in order, at the
   * new time (as a real event loop finds them when it runs again).
   */
  jump(ms: number): void {
    this.time += ms;
    this.advance(0);
  }

  get pendingTimers(): number {
    return this.timers.size;
  }
}
