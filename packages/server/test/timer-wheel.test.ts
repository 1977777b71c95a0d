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

  it('catching up past the ring span in one call fires only nodes still scheduled, each due, all that are due, ticks in order', () => {
    // Firing node i removes node (3i+1) mod n and files (5i+2) mod n again further out (a new lease),
    // as a lease end that hands the lock to a waiter removes that waiter's wait end and files the
    // new grant's lease end (firing the wait end anyway crashed a node: simulation seed 38).
    const n = 24;
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom(0 as const, 1 as const), fc.integer({ min: 0, max: 5_000 })), { minLength: n, maxLength: n }),
        fc.integer({ min: 6_001, max: 9_000 }),
        (setup, refile) => {
          const wheel = new TimerWheel<Node>(10, 16, 0); // the ring spans 160 ms: advancing to 6 s leaps
          const nodes = setup.map(([lane], id) => new Node(id, lane));
          const scheduled = new Map<number, number>(); // id -> due (the model)
          const file = (node: Node, due: number) => {
            wheel.add(node, due);
            scheduled.set(node.id, due);
          };
          setup.forEach(([, due], id) => file(nodes[id]!, due));
          const now = 6_000;
          const fired: Array<{ due: number; lane: 0 | 1 }> = [];
          wheel.advance(now, (node) => {
            expect(scheduled.get(node.id)).toBeLessThanOrEqual(now); // scheduled, and due
            scheduled.delete(node.id);
            fired.push({ due: node.due, lane: node.wheelLane });
            const gone = nodes[(3 * node.id + 1) % n]!;
            wheel.remove(gone);
            scheduled.delete(gone.id);
            file(nodes[(5 * node.id + 2) % n]!, refile);
          });
          for (const due of scheduled.values()) expect(due).toBeGreaterThan(now); // nothing due is left
          expect(wheel.size).toBe(scheduled.size);
          for (let i = 1; i < fired.length; i++) {
            const [a, b] = [fired[i - 1]!, fired[i]!];
            const ta = Math.ceil(a.due / 10);
            const tb = Math.ceil(b.due / 10);
            expect(ta).toBeLessThanOrEqual(tb);
            if (ta === tb) expect(a.lane).toBeLessThanOrEqual(b.lane);
          }
        },
      ),
      { numRuns: 500 },
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
