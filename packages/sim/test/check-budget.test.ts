/**
 * The history check's budget is in search steps: a seed whose check runs out of it fails as
 * inconclusive (it used to pass), and the same seed and budget give the same verdict anywhere.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_OPTIONS, simulate } from '../src/simulation.js';

describe('the history check of a seed', () => {
  it('fails the seed when it runs out of its step budget, and says how to replay it', { timeout: 60_000 }, async () => {
    const passed = await simulate({ ...DEFAULT_OPTIONS, seed: 1 });
    expect(passed.ok, passed.failure).toBe(true);
    expect(passed.checkSteps).toBeGreaterThan(1);
    const starved = await simulate({ ...DEFAULT_OPTIONS, seed: 1, checkSteps: 1 });
    expect(starved.ok).toBe(false);
    expect(starved.failure).toMatch(/^history: inconclusive, the search needed more than 1 steps on .* \(replay with a larger --check-steps/);
    // Steps, not time: the same budget stops at the same step on every run.
    const again = await simulate({ ...DEFAULT_OPTIONS, seed: 1, checkSteps: 1 });
    expect(again.failure).toBe(starved.failure);
    expect(again.checkSteps).toBe(starved.checkSteps);
  });
});
