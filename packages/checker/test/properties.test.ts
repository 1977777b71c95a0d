/**
 * Property tests: histories of a simulated correct lock always pass (with
 * overlapping intervals, leases ending anywhere in their slack, unknown
 * outcomes that did or did not take effect); histories of a lock that
 * grants held keys always fail (the anomaly named is where the search got
 * furthest: the double grant itself, or what the second grant made
 * impossible later on that key).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { check, formatVerdict } from '../src/index.js';
import { simCommand, simulate } from './sim.js';

const SLACK_MS = 250;

describe('simulated locks', () => {
  it('a correct lock always gives a linearizable history', () => {
    fc.assert(
      fc.property(fc.array(simCommand({ keys: 2, maxLatencyMs: 300, maxGapMs: 150, unknowns: true }), { maxLength: 60 }), (commands) => {
        const { history } = simulate(commands, { slackMs: SLACK_MS, maxLatencyMs: 300 });
        const v = check(history, { slackMs: SLACK_MS });
        expect(v.ok, formatVerdict(v)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('a lock that grants held keys always fails on that key', () => {
    fc.assert(
      fc.property(fc.array(simCommand({ keys: 2, maxLatencyMs: 100, maxGapMs: 150, unknowns: false }), { minLength: 2, maxLength: 60 }), (commands) => {
        const { history, doubleGrants } = simulate(commands, { slackMs: SLACK_MS, maxLatencyMs: 100, broken: true });
        fc.pre(doubleGrants > 0);
        const v = check(history, { slackMs: SLACK_MS });
        expect(v.ok).toBe(false);
        // Tokens grow with time in the simulation: only the per-key search can find this.
        expect(v.anomalies.filter((a) => a.key === undefined)).toEqual([]);
        expect(v.anomalies.length).toBeGreaterThan(0);
      }),
      { numRuns: 200 },
    );
  });
});
