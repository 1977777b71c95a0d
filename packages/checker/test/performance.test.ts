/**
 * The checker on 10,000 operations of one key (about ten overlapping at any
 * time), with and without unknown outcomes: it must finish, well within its
 * budget. Bounds are on search steps, which do not depend on machine load.
 * With CHECKER_BENCH=1 it also prints the time taken (docs/verify.md).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { check } from '../src/index.js';
import { simCommand, simulate } from './sim.js';

function history(unknowns: boolean) {
  const commands = fc.sample(simCommand({ keys: 1, maxLatencyMs: 50, maxGapMs: 10, unknowns }), { numRuns: 10_000, seed: 3 });
  return simulate(commands, { slackMs: 250, maxLatencyMs: 50 }).history;
}

describe('checker performance', () => {
  for (const [name, unknowns, maxSteps] of [
    ['answered outcomes only', false, 50_000],
    ['about 10% unknown outcomes', true, 2_000_000],
  ] as const) {
    it(`checks 10,000 operations on one key, ${name}`, () => {
      const ops = history(unknowns);
      const t0 = performance.now();
      const v = check(ops, { timeLimitMs: 120_000 });
      const ms = performance.now() - t0;
      if (process.env.CHECKER_BENCH === '1') {
        const unknown = ops.filter((o) => o.outcome === 'unknown').length;
        console.log(`${ops.length} ops (${unknown} unknown): ${ms.toFixed(0)} ms, ${Math.round((ops.length / ms) * 1000)} ops/s, ${v.steps} steps`);
      }
      expect(v.ok).toBe(true);
      expect(v.steps).toBeLessThan(maxSteps);
    }, 120_000);
  }
});
