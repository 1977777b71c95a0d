import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TimerWheel, type TimerNode } from '../src/engine/timer-wheel.js';

class Node implements TimerNode {
  due = 0;
  wheelTick = -1;
  wheelPrev: TimerNode | null = null;
  wheelNext: TimerNode | null = null;
  constructor(
    readonly id: number,
    readonly wheelLane: 0 | 1,
  ) {}
}

describe('TimerWheel', () => {
  it('never fires early, fires everything due, and orders lanes within a tick', () => {
    const opArb = fc.oneof(
      fc.record({ op: fc.constant('add' as const), id: fc.nat(30), lane: fc.constantFrom(0 as const, 1 as const), delay: fc.integer({ min: -50, max: 400_000 }) }),
      fc.record({ op: fc.constant('remove' as const), id: fc.nat(30) }),
      fc.record({ op: fc.constant('advance' as const), by: fc.integer({ min: 0, max: 50_000 }) }),
    );
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 120 }), (ops) => {
        let now = 123_457;
        const wheel = new TimerWheel<Node>(10, 1 << 12, now);
        const nodes = new Map<number, Node>();
        const scheduled = new Map<number, number>(); // id -> due (model)
        // A node added with a deadline in a tick already processed fires at the next tick.
        let processedUpTo = Math.floor(now / 10) - 1;
        const fireTick = new Map<number, number>();
        for (const o of ops) {
          if (o.op === 'add') {
            const node = nodes.get(o.id) ?? new Node(o.id, o.lane);
            nodes.set(o.id, node);
            wheel.add(node, now + o.delay);
            scheduled.set(o.id, now + o.delay);
            fireTick.set(o.id, Math.max(Math.ceil((now + o.delay) / 10), processedUpTo + 1));
          } else if (o.op === 'remove') {
            const node = nodes.get(o.id);
            if (node) wheel.remove(node);
            scheduled.delete(o.id);
          } else {
            now += o.by;
            const fired: Node[] = [];
            wheel.advance(now, (n) => fired.push(n));
            // Nothing fired early...
            for (const n of fired) {
              expect(scheduled.get(n.id)).toBeLessThanOrEqual(now);
              scheduled.delete(n.id);
            }
            // ...and everything whose tick has come did fire.
            processedUpTo = Math.floor(now / 10);
            for (const id of scheduled.keys()) expect(fireTick.get(id)! * 10).toBeGreaterThan(now);
            // Ticks fire in order; within a tick lane 0 comes before lane 1.
            for (let i = 1; i < fired.length; i++) {
              const a = Math.ceil(fired[i - 1]!.due / 10);
              const b = Math.ceil(fired[i]!.due / 10);
              if (a === b) expect(fired[i - 1]!.wheelLane).toBeLessThanOrEqual(fired[i]!.wheelLane);
            }
          }
          expect(wheel.size).toBe(scheduled.size);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('fires a deadline beyond the ring span at its time, not earlier', () => {
    const wheel = new TimerWheel<Node>(10, 16, 0);
    const n = new Node(1, 0);
    wheel.add(n, 1_000); // the ring covers only 160 ms
    const fired: number[] = [];
    for (let t = 0; t <= 1_200; t += 10) wheel.advance(t, () => fired.push(t));
    expect(fired).toEqual([1_000]);
  });
});
