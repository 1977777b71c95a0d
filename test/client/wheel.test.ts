/**
 * The client's deadline wheel on a simulated clock: a deadline fires at its
 * exact moment (given its own timer a tick before), never when cancelled or
 * moved, also when it is further out than the ring spans; and the wheel's
 * tick keeps the process alive only while a deadline that does waits in it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { useClock } from '../../packages/client/src/timing.js';
import { Deadline, Wheel } from '../../packages/client/src/wheel.js';

class CallbackDeadline extends Deadline {
  constructor(
    wheel: Wheel,
    keepAlive: boolean,
    private readonly fn: () => void,
  ) {
    super(wheel, keepAlive);
  }

  protected fire(): void {
    this.fn();
  }
}

/** A clock whose timers run when `advance` passes their time, in time order. */
function fakeClock() {
  let t = 1_000_003; // not a multiple of the tick
  let seq = 0;
  const timers = new Map<number, { at: number; fn: () => void; keepAlive: boolean }>();
  useClock({
    now: () => t,
    setTimer: (ms, fn, keepAlive) => {
      timers.set(++seq, { at: t + ms, fn, keepAlive });
      return seq;
    },
    clearTimer: (h) => void timers.delete(h as number),
  });
  return {
    now: () => t,
    /** Timers armed now: how many, and how many keep the process alive. */
    armed: () => ({ all: timers.size, keepingAlive: [...timers.values()].filter((x) => x.keepAlive).length }),
    advance(ms: number): void {
      const end = t + ms;
      for (;;) {
        const next = [...timers.entries()].sort((a, b) => a[1].at - b[1].at || a[0] - b[0])[0];
        if (next === undefined || next[1].at > end) break;
        timers.delete(next[0]);
        t = Math.max(t, next[1].at);
        next[1].fn();
      }
      t = end;
    },
  };
}

afterEach(() => useClock(undefined));

describe('the deadline wheel', () => {
  it('fires each deadline at its moment, near or far, and never a cancelled or moved one', () => {
    const clock = fakeClock();
    const wheel = new Wheel();
    const fired: Array<[string, number]> = [];
    const at = (name: string, inMs: number) => {
      const d = new CallbackDeadline(wheel, true, () => fired.push([name, clock.now()]));
      d.setDeadline(clock.now() + inMs);
      return d;
    };
    const t0 = clock.now();
    at('soon', 30);
    at('half-second', 500);
    at('window', 5_000);
    at('far', 60_000); // beyond the ring (64 ticks of 100 ms)
    at('cancelled', 700).cancelDeadline();
    at('moved', 800).setDeadline(t0 + 1_234);
    // While they wait in the wheel, one timer (its tick) stands for all of them, and none of their own.
    expect(clock.armed().all).toBe(2); // the tick, and 'soon' (less than a tick away: its own timer at once)
    clock.advance(70_000);
    expect(fired).toEqual([
      ['soon', t0 + 30],
      ['half-second', t0 + 500],
      ['moved', t0 + 1_234],
      ['window', t0 + 5_000],
      ['far', t0 + 60_000],
    ]);
    // Empty: it stops ticking.
    expect(clock.armed().all).toBe(0);
  });

  it('keeps the process alive only while a deadline that does waits', () => {
    const clock = fakeClock();
    const wheel = new Wheel();
    const quiet = new CallbackDeadline(wheel, false, () => {});
    quiet.setDeadline(clock.now() + 10_000);
    expect(clock.armed()).toEqual({ all: 1, keepingAlive: 0 });
    const awaited = new CallbackDeadline(wheel, true, () => {});
    awaited.setDeadline(clock.now() + 5_000);
    expect(clock.armed()).toEqual({ all: 1, keepingAlive: 1 });
    awaited.cancelDeadline();
    clock.advance(150);
    expect(clock.armed()).toEqual({ all: 1, keepingAlive: 0 });
  });
});
