/**
 * Time, injected: the engine reads time and sets its one timer only through
 * this, so tests can drive time by hand (see ManualClock).
 */
import { performance } from 'node:perf_hooks';

export interface TimerHandle {
  cancel(): void;
}

export interface Clock {
  /** Monotonic milliseconds (never goes back; unrelated to wall time). */
  now(): number;
  /** Calls `fn` once after `ms`; the returned handle cancels it. */
  schedule(ms: number, fn: () => void): TimerHandle;
}

export const systemClock: Clock = {
  now: () => performance.now(),
  schedule(ms, fn) {
    const t = setTimeout(fn, ms);
    return { cancel: () => clearTimeout(t) };
  },
};

/** A clock that moves only when told to; timers fire in time order as it moves. */
export class ManualClock implements Clock {
  private time: number;
  private seq = 0;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();

  constructor(start = 1_000_000) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  schedule(ms: number, fn: () => void): TimerHandle {
    const id = this.seq++;
    this.timers.set(id, { at: this.time + Math.max(0, ms), fn });
    return { cancel: () => this.timers.delete(id) };
  }

  /** Moves time forward by `ms`, firing due timers in order (each at its own time). */
  advance(ms: number): void {
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
      this.timers.delete(nextId);
      this.time = Math.max(this.time, t.at);
      t.fn();
    }
    this.time = end;
  }

  get pendingTimers(): number {
    return this.timers.size;
  }
}
