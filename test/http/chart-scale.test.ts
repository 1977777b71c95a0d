/**
 * The dashboard charts' scales (packages/web/src/chart.ts), in Node: round
 * axis steps, integer axes for counts, and a time window that grows with the
 * page's history from one minute to five.
 */
import { describe, expect, it } from 'vitest';
import { niceStep, shownWindow, ticks } from '../../packages/web/src/chart-scale.js';

describe('chart scales', () => {
  it('steps by 1, 2 or 5 times a power of ten', () => {
    expect([0.3, 1, 1.1, 3, 7, 12, 0.004].map(niceStep)).toEqual([0.5, 1, 2, 5, 10, 20, 0.005]);
    expect(niceStep(0)).toBe(1);
    expect(niceStep(NaN)).toBe(1);
  });

  it('ticks from 0 past the maximum, integers only for counts', () => {
    expect(ticks(27)).toEqual([0, 10, 20, 30]);
    expect(ticks(0)).toEqual([0, 0.5]); // all zero: the line lies on the axis
    expect(ticks(2, 4, true)).toEqual([0, 1, 2]);
    expect(ticks(0, 4, true)).toEqual([0, 1]);
    expect(ticks(0.00046)).toEqual([0, 0.0002, 0.0004, 0.0006]);
  });

  it('shows at least a minute and at most the maximum window, in whole minutes', () => {
    const now = 1_000_000_000;
    const since = (ms: number) => [{ label: 's', points: [{ at: now - ms, value: 1 }] }];
    expect(shownWindow([], 300_000, now)).toBe(60_000);
    expect(shownWindow(since(5_000), 300_000, now)).toBe(60_000);
    expect(shownWindow(since(61_000), 300_000, now)).toBe(120_000);
    expect(shownWindow(since(3_600_000), 300_000, now)).toBe(300_000);
  });
});
