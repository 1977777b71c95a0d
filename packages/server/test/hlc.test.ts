/** The priority cluster's hybrid-clock tokens (cluster/hlc.ts). */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { clockToken, MAX_NODES, nextToken, ownResidue, tokenWallMs } from '../src/cluster/hlc.js';

const NOW = 1_796_000_000_000; // 2026-12 in Unix ms

describe('hybrid-clock tokens', () => {
  it('follow the clock when idle, and are above every token seen otherwise', () => {
    expect(nextToken(1n, NOW, 0)).toBe(clockToken(NOW));
    expect(tokenWallMs(nextToken(1n, NOW, 3))).toBe(NOW);
    const seen = clockToken(NOW + 5_000);
    expect(nextToken(seen, NOW, 2)).toBeGreaterThanOrEqual(seen);
  });

  it('defect 1: a restart a moment later (no data directory, nothing inherited) issues larger tokens than before it', () => {
    // Before: the clock at NOW, a burst of 1,000 grants within the same millisecond.
    let next = 1n;
    let last = 0n;
    for (let i = 0; i < 1_000; i++) {
      last = nextToken(next, NOW, 0);
      next = last + 1n;
    }
    // After a restart 1 ms later, from scratch.
    expect(nextToken(1n, NOW + 1, 0)).toBeGreaterThan(last);
  });

  it('never collide between two nodes active at once, and grow on each', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 1 }), fc.integer({ min: 0, max: 3 })), { maxLength: 300 }), (steps) => {
        const next = [1n, 1n];
        let wall = NOW;
        const issued = new Set<bigint>();
        const last = [0n, 0n];
        for (const [node, advance] of steps) {
          wall += advance;
          const t = nextToken(next[node]!, wall, node);
          expect(t % BigInt(MAX_NODES)).toBe(BigInt(node));
          expect(t).toBeGreaterThan(last[node]!);
          expect(issued.has(t)).toBe(false);
          issued.add(t);
          last[node] = t;
          next[node] = t + 1n;
        }
      }),
    );
  });

  it('fit in a u64 for centuries, and are above every token of a single node (Unix µs)', () => {
    expect(clockToken(NOW)).toBeGreaterThan(BigInt(NOW) * 1000n * 100n);
    expect(clockToken(Date.UTC(4200, 0, 1))).toBeLessThan(2n ** 64n);
    expect(ownResidue(33n, 2)).toBe(34n);
    expect(ownResidue(34n, 2)).toBe(34n);
  });
});
