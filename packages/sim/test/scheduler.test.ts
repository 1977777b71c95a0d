import { describe, expect, it } from 'vitest';
import { Scheduler } from '../src/scheduler.js';

describe('Scheduler', () => {
  it('runs events in time order, ties in scheduling order', async () => {
    const s = new Scheduler(1);
    const order: string[] = [];
    s.after(5, 'c', () => order.push('c'));
    s.after(1, 'a', () => order.push('a'));
    s.after(5, 'd', () => order.push('d'));
    s.after(1, 'b', () => order.push('b'));
    await s.run(100);
    expect(order).toEqual(['a', 'b', 'c', 'd']);
    expect(s.now).toBe(100); // the horizon: nothing else was due
  });

  it('lets promise continuations of one event finish before the next event', async () => {
    const s = new Scheduler(1);
    const order: string[] = [];
    s.after(1, 'first', () => {
      void (async () => {
        await Promise.resolve();
        await Promise.resolve();
        order.push('first done');
      })();
    });
    s.after(1, 'second', () => order.push('second'));
    await s.run(10);
    expect(order).toEqual(['first done', 'second']);
  });

  it('stops at the horizon and resumes from there', async () => {
    const s = new Scheduler(1);
    const ran: number[] = [];
    for (const t of [1, 2, 3, 10]) s.after(t, String(t), () => ran.push(t));
    await s.run(5);
    expect(ran).toEqual([1, 2, 3]);
    expect(s.now).toBe(5);
    await s.run(20);
    expect(ran).toEqual([1, 2, 3, 10]);
  });

  it('skips cancelled events and keeps a bounded trace', async () => {
    const s = new Scheduler(1, 3);
    const e = s.after(1, 'cancelled', () => {
      throw new Error('must not run');
    });
    e.cancelled = true;
    for (let i = 0; i < 5; i++) s.after(2 + i, `e${i}`, () => {});
    await s.run(100);
    expect(s.recent.map((l) => l.split(' ')[1])).toEqual(['e2', 'e3', 'e4']);
  });

  it('the same seed gives the same choices', () => {
    const a = new Scheduler(42);
    const b = new Scheduler(42);
    expect(Array.from({ length: 10 }, () => a.int(0, 1000))).toEqual(Array.from({ length: 10 }, () => b.int(0, 1000)));
  });
});
