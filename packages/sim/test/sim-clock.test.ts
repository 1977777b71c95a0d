import { describe, expect, it } from 'vitest';
import { Scheduler } from '../src/scheduler.js';
import { SIM_EPOCH_MS, SimClock } from '../src/sim-clock.js';

describe('SimClock', () => {
  it('runs at its rate: a timer of 100 local ms takes 50 simulated ms at rate 2', async () => {
    const sched = new Scheduler(1);
    const fast = new SimClock(sched, 'fast', { rate: 2 });
    const slow = new SimClock(sched, 'slow', { rate: 0.5 });
    const fired: Array<[string, number]> = [];
    fast.setTimeout(() => fired.push(['fast', sched.now]), 100);
    slow.setTimeout(() => fired.push(['slow', sched.now]), 100);
    await sched.run(1_000);
    expect(fired).toEqual([
      ['fast', 50],
      ['slow', 200],
    ]);
  });

  it('monotonic time never goes back; the wall clock can be stepped', async () => {
    const sched = new Scheduler(1);
    const c = new SimClock(sched, 'n1');
    expect(c.wallMs()).toBe(SIM_EPOCH_MS);
    const t0 = c.now();
    sched.after(10, 'x', () => c.stepWall(-5_000));
    await sched.run(20);
    expect(c.now() - t0).toBe(20);
    expect(c.wallMs()).toBe(SIM_EPOCH_MS + 20 - 5_000);
  });

  it('a paused process fires nothing; on resume the overdue timers fire in order', async () => {
    const sched = new Scheduler(1);
    const c = new SimClock(sched, 'n1');
    const fired: string[] = [];
    c.setTimeout(() => fired.push(`b@${sched.now}`), 30);
    c.setTimeout(() => fired.push(`a@${sched.now}`), 20);
    sched.after(10, 'pause', () => c.pause());
    sched.after(100, 'resume', () => c.resume());
    await sched.run(1_000);
    // Paused at 10 with 10 and 20 local ms to go: they fire 10 and 20 ms after the resume.
    expect(fired).toEqual(['a@110', 'b@120']);
  });

  it('a pause that lets the monotonic clock run (a real SIGSTOP): the process wakes up late, its overdue timers fire at once, in order', async () => {
    const sched = new Scheduler(1);
    const c = new SimClock(sched, 'n1');
    const fired: string[] = [];
    c.setTimeout(() => fired.push(`b@${sched.now}`), 30);
    c.setTimeout(() => fired.push(`a@${sched.now}`), 20);
    const t0 = c.now();
    let atResume = 0;
    sched.after(10, 'pause', () => c.pause(true));
    sched.after(100, 'resume', () => ((atResume = c.now() - t0), c.resume()));
    await sched.run(1_000);
    expect(atResume).toBe(100);
    expect(fired).toEqual(['a@100', 'b@100']);
  });

  it('an interval repeats until cleared; clearAll stops everything', async () => {
    const sched = new Scheduler(1);
    const c = new SimClock(sched, 'n1');
    let n = 0;
    const t = c.setInterval(() => n++, 10);
    sched.after(55, 'clear', () => c.clear(t));
    await sched.run(200);
    expect(n).toBe(5);
    c.setTimeout(() => n++, 10);
    c.clearAll();
    await sched.run(400);
    expect(n).toBe(5);
  });

  it('a rate change keeps pending timers at their local due time', async () => {
    const sched = new Scheduler(1);
    const c = new SimClock(sched, 'n1');
    let at = 0;
    c.setTimeout(() => (at = sched.now), 100);
    sched.after(50, 'speed up', () => c.setRate(2));
    await sched.run(1_000);
    expect(at).toBe(75);
  });
});
