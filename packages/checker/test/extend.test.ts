/**
 * The checker's model of lease extension, against hand-made histories: an
 * `X` restarts the holder's lease at its point with its own length (longer
 * or shorter), keeps the token, never revives a lease that had ended; `G`
 * is to an extension what `N` is to a release. Leases in ms, slack 250 ms.
 */
import { describe, expect, it } from 'vitest';
import { check, formatVerdict, type History } from '../src/index.js';
import { partitionByKey } from '../src/check.js';
import { searchKey } from '../src/search.js';
import { extended, extendUnknown, granted, notExtended, notHeld, released, timedOut } from './ops.js';

function verdict(history: History) {
  return check(history, { slackMs: 250 });
}

function expectLinearizable(history: History): void {
  const v = verdict(history);
  expect(v.anomalies, formatVerdict(v)).toEqual([]);
  expect(v.ok).toBe(true);
}

function expectAnomaly(history: History, kind: string): string {
  const v = verdict(history);
  expect(v.ok).toBe(false);
  expect(v.anomalies.map((a) => a.kind), formatVerdict(v)).toContain(kind);
  return formatVerdict(v);
}

describe('extensions in the lock model', () => {
  it('keeps the holder past its own lease after an X: T is true, the next grant comes after the new lease', () => {
    expectLinearizable([
      granted('k', 1n, 0, 10, { lease: 1000 }),
      extended('k', 1n, 3000, 500, 510),
      timedOut('k', 2000, 2010, { client: 1 }),
      granted('k', 2n, 3400, 3800, { client: 1 }),
    ]);
    // The same T without the extension: the lease had surely ended.
    expectAnomaly([granted('k', 1n, 0, 10, { lease: 1000 }), timedOut('k', 2000, 2010, { client: 1 })], 'false-timeout');
  });

  it('finds a grant made while an extended lease was surely running (the quick test leaves it to the search)', () => {
    const history = [granted('k', 1n, 0, 10, { lease: 1000 }), extended('k', 1n, 3000, 500, 510), granted('k', 2n, 2000, 2010, { client: 1 })];
    const text = expectAnomaly(history, 'double-grant');
    expect(text).toMatch(/extended by an extension to 3000 ms/);
  });

  it('lets an extension shorten a lease', () => {
    expectLinearizable([granted('k', 1n, 0, 10, { lease: 10_000 }), extended('k', 1n, 1000, 100, 110), granted('k', 2n, 1500, 1510, { client: 1 })]);
    expectAnomaly([granted('k', 1n, 0, 10, { lease: 10_000 }), granted('k', 2n, 1500, 1510, { client: 1 })], 'double-grant');
  });

  it('rejects an X after the lease had surely ended (an extension never revives a grant), or for a token that is not the holder', () => {
    expectAnomaly([granted('k', 1n, 0, 10, { lease: 1000 }), extended('k', 1n, 5000, 2000, 2010)], 'false-extend');
    expectAnomaly([granted('k', 1n, 0, 10, { lease: 1000 }), released('k', 1n, 100, 110), extended('k', 1n, 5000, 200, 210)], 'false-extend');
    expectAnomaly([granted('k', 1n, 0, 10, { lease: 5000 }), extended('k', 7n, 5000, 200, 210)], 'false-extend');
  });

  it('treats G like N: for the holder\'s token it needs a lease that could have ended, for others it is always true', () => {
    expectLinearizable([granted('k', 1n, 0, 10, { lease: 1000 }), notExtended('k', 1n, 5000, 1200, 1210), granted('k', 2n, 1300, 1310, { client: 1 })]);
    expectLinearizable([granted('k', 1n, 0, 10, { lease: 5000 }), notExtended('k', 99n, 5000, 100, 110), notHeld('k', 99n, 120, 130)]);
    expectAnomaly([granted('k', 1n, 0, 10, { lease: 5000 }), notExtended('k', 1n, 5000, 100, 110)], 'false-not-extended');
  });

  it('lets an unknown extension have taken effect, or not', () => {
    // Taken effect: explains a T after the grant's own lease.
    expectLinearizable([granted('k', 1n, 0, 10, { lease: 1000 }), extendUnknown('k', 1n, 3000, 500), timedOut('k', 2000, 2010, { client: 1 })]);
    // Not taken effect: explains a grant after the grant's own lease.
    expectLinearizable([granted('k', 1n, 0, 10, { lease: 1000 }), extendUnknown('k', 1n, 3000, 500), granted('k', 2n, 1500, 1510, { client: 1 })]);
    // But it cannot revive the lease once it had ended.
    expectAnomaly([granted('k', 1n, 0, 10, { lease: 1000 }), extendUnknown('k', 1n, 3000, 1600), timedOut('k', 2000, 2010, { client: 1 })], 'false-timeout');
  });

  it('chains extensions: each restarts the lease from its own point', () => {
    expectLinearizable([
      granted('k', 1n, 0, 10, { lease: 1000 }),
      extended('k', 1n, 1000, 700, 710),
      extended('k', 1n, 1000, 1400, 1410),
      extended('k', 1n, 1000, 2100, 2110),
      timedOut('k', 2900, 2910, { client: 1 }),
      released('k', 1n, 3000, 3010),
    ]);
    expectAnomaly(
      [granted('k', 1n, 0, 10, { lease: 1000 }), extended('k', 1n, 1000, 700, 710), extended('k', 1n, 1000, 2100, 2110)],
      'false-extend',
    );
  });

  it('reaches the same verdicts by search alone', () => {
    const history = [granted('k', 1n, 0, 10, { lease: 1000 }), extended('k', 1n, 3000, 500, 510), granted('k', 2n, 2000, 2010, { client: 1 })];
    const [ops] = [...partitionByKey(history, 0, 0).values()];
    expect(searchKey(ops!, 250_000, { maxSteps: 100_000, deadline: Infinity }).verdict).toBe('violation');
  });
});
