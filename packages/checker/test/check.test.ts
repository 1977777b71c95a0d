/**
 * The checker against hand-made histories: each one is accepted or rejected
 * for a reason a person can verify by reading it. Leases are 1000 ms and
 * the slack 250 ms unless a case says otherwise.
 */
import { describe, expect, it } from 'vitest';
import { check, formatVerdict, type CheckOptions, type History, type Verdict } from '../src/index.js';
import { acquireUnknown, busy, granted, notHeld, releaseUnknown, released, timedOut } from './ops.js';

function expectLinearizable(history: History, options?: CheckOptions): Verdict {
  const v = check(history, options);
  expect(v.anomalies, formatVerdict(v)).toEqual([]);
  expect(v.ok).toBe(true);
  expect(v.inconclusive).toBe(false);
  return v;
}

function expectAnomaly(history: History, kind: string, options?: CheckOptions): Verdict {
  const v = check(history, options);
  expect(v.ok).toBe(false);
  expect(v.anomalies.map((a) => a.kind), formatVerdict(v)).toContain(kind);
  return v;
}

describe('linearizable histories', () => {
  it('accepts the empty history', () => {
    const v = expectLinearizable([]);
    expect(v.keysChecked).toBe(0);
  });

  it('accepts a sequential round of every outcome', () => {
    const v = expectLinearizable([
      granted('k', 1n, 0, 1),
      timedOut('k', 10, 11, { client: 1 }),
      notHeld('k', 99n, 15, 16, 1),
      released('k', 1n, 20, 21),
      notHeld('k', 1n, 30, 31),
      granted('k', 2n, 40, 41, { client: 1 }),
      busy('k', 50, 51),
      released('k', 2n, 60, 61, 1),
    ]);
    expect(v.keysChecked).toBe(1);
    expect(v.operations).toBe(8);
  });

  it('orders overlapping operations by what they saw, not by when they returned', () => {
    expectLinearizable([
      // The grant returned last but must have happened before the timeout that saw the key held.
      granted('k', 1n, 0, 100),
      timedOut('k', 5, 6, { client: 1 }),
      // A release overlapping the next grant: released first, then granted.
      released('k', 1n, 200, 260),
      granted('k', 2n, 220, 240, { client: 1 }),
    ]);
  });

  it('accepts a grant that completed first but carries the larger token when the intervals overlap', () => {
    expectLinearizable([granted('k', 2n, 0, 100), granted('k', 1n, 10, 20, { client: 1 }), released('k', 1n, 30, 40, 1)]);
  });

  it('accepts a waiting acquire granted on release and one granted on lease expiry (FIFO hand-off)', () => {
    expectLinearizable([
      granted('k', 1n, 0, 10),
      granted('k', 2n, 5, 520, { wait: 5000, client: 1 }),
      released('k', 1n, 500, 510),
      granted('k', 3n, 600, 1530, { wait: 5000, client: 2 }),
    ]);
  });

  it('lets a second grant in once the first lease could have ended', () => {
    expectLinearizable([granted('k', 1n, 0, 10), granted('k', 2n, 1005, 1010, { client: 1 })]);
  });

  it('accepts both answers to a release that races with the lease expiry', () => {
    expectLinearizable([granted('k', 1n, 0, 10), released('k', 1n, 1000, 1100)]);
    expectLinearizable([granted('k', 1n, 0, 10), notHeld('k', 1n, 1000, 1100)]);
  });

  it('accepts T while the lease may still be running in its slack', () => {
    expectLinearizable([granted('k', 1n, 0, 10), timedOut('k', 1100, 1110, { client: 1 })]);
  });

  it('places an unknown acquire as granted when a T needs a holder', () => {
    expectLinearizable([acquireUnknown('k', 0), timedOut('k', 10, 20, { client: 1 })]);
  });

  it('leaves an unknown acquire out when a grant needs the key free', () => {
    expectLinearizable([acquireUnknown('k', 0), granted('k', 5n, 10, 20, { client: 1 }), timedOut('k', 30, 40, { client: 2 })]);
  });

  it('lets an unknown acquire take effect late (it may have waited in the queue)', () => {
    expectLinearizable([
      granted('k', 1n, 0, 10, { lease: 5000 }),
      acquireUnknown('k', 20, { wait: 10_000, client: 1 }),
      released('k', 1n, 3000, 3010),
      // Only the unknown acquire, granted at the release, can be why the key is held now.
      timedOut('k', 3500, 3510, { client: 2 }),
    ]);
  });

  it('places an unknown release when a later grant needs the key free', () => {
    expectLinearizable([granted('k', 1n, 0, 10, { lease: 10_000 }), releaseUnknown('k', 1n, 20), granted('k', 2n, 30, 40, { client: 1 })]);
  });

  it('leaves an unknown release out (or late) when a T needs the key held', () => {
    expectLinearizable([
      granted('k', 1n, 0, 10, { lease: 10_000 }),
      releaseUnknown('k', 1n, 20),
      timedOut('k', 30, 40, { client: 1 }),
      granted('k', 2n, 50, 60, { client: 1 }),
    ]);
  });

  it('ignores busy answers, which change nothing', () => {
    expectLinearizable([granted('k', 1n, 0, 10), busy('k', 20, 30, { client: 1 }), busy('k', 5000, 5001, { client: 1 })]);
  });

  it('checks keys independently, and tokens need only grow in real time across keys', () => {
    expectLinearizable([
      granted('a', 10n, 0, 10),
      granted('b', 11n, 5, 30, { client: 1 }),
      // Invoked before the grants of 10 and 11 were received: a smaller token is fine.
      granted('c', 9n, 5, 40, { client: 2 }),
      granted('a', 12n, 2000, 2010),
    ]);
  });

  it('lets a lease that ran into a standstill end up to its slack after it, and no earlier than its lease', () => {
    // Suspended for an hour from 500 ms: a release of token 1 right after it may still find it held
    // (a node restarted and gave what it recovered a fresh lease), and so may a T.
    const hour = 3_600_000;
    const standstills = [[500, 500 + hour]] as const;
    const afterIt = [granted('k', 1n, 0, 10), released('k', 1n, 500 + hour + 100, 500 + hour + 120)];
    expectAnomaly(afterIt, 'false-release');
    expectLinearizable(afterIt, { standstills });
    expectLinearizable([granted('k', 1n, 0, 10), timedOut('k', 500 + hour + 100, 500 + hour + 120, { client: 1 })], { standstills });
    // ... but only within the slack after it,
    expectAnomaly([granted('k', 1n, 0, 10), released('k', 1n, 500 + hour + 1_300, 500 + hour + 1_320)], 'false-release', { standstills });
    // and its lease may still have ended on time: N for it, or another grant, right after the standstill.
    expectLinearizable([granted('k', 1n, 0, 10), notHeld('k', 1n, 500 + hour + 100, 500 + hour + 120)], { standstills });
    expectLinearizable([granted('k', 1n, 0, 10), granted('k', 2n, 500 + hour + 100, 500 + hour + 120, { client: 1 })], { standstills });
    // A standstill after the lease and its slack moves nothing.
    expectAnomaly([granted('k', 1n, 0, 10), released('k', 1n, 2_000 + hour + 100, 2_000 + hour + 120)], 'false-release', { standstills: [[2_000, 2_000 + hour]] });
  });

  it('widens the slack and the clock skew when told to', () => {
    const lateRelease = [granted('k', 1n, 0, 10), released('k', 1n, 1300, 1400)];
    expectAnomaly(lateRelease, 'false-release');
    expectLinearizable(lateRelease, { slackMs: 500 });
    const skewed = [granted('a', 9n, 0, 10), granted('b', 8n, 20, 30, { client: 1 })];
    expectAnomaly(skewed, 'token-order');
    expectLinearizable(skewed, { clockSkewMs: 20 });
    // The second grant completed 995 ms after the first was sent: with a 1000 ms lease that is a
    // double grant unless the two clocks may disagree by 5 ms or more.
    const early = [granted('k', 1n, 0, 10), granted('k', 2n, 990, 995, { client: 1 })];
    expectAnomaly(early, 'double-grant', { clockSkewMs: 4 });
    expectLinearizable(early, { clockSkewMs: 6 });
  });
});

describe('non-linearizable histories', () => {
  it('finds two holders at once while both leases surely run, and shows both grants', () => {
    const first = granted('k', 1n, 0, 10, { lease: 5000 });
    const second = granted('k', 2n, 20, 30, { lease: 5000, client: 1 });
    const v = expectAnomaly([first, second], 'double-grant');
    expect(v.anomalies).toHaveLength(1);
    expect(v.anomalies[0]!.key).toBe('k');
    expect(v.anomalies[0]!.ops).toEqual([second, first]);
    const text = formatVerdict(v);
    expect(text).toContain('double-grant on key k');
    expect(text).toContain('granted while token 1 still held the key');
    expect(text).toContain('client 1: acquire k wait 0 s lease 5 s -> granted 2  [20.0 .. 30.0 ms]');
    expect(text).toMatch(/verdict: NOT linearizable \(1 anomaly\)$/);
  });

  it('finds a grant just before the first lease could have ended', () => {
    expectAnomaly([granted('k', 1n, 0, 10), granted('k', 2n, 900, 990, { client: 1 })], 'double-grant');
  });

  it('finds a T that proves the key held after it was released', () => {
    const v = expectAnomaly([granted('k', 1n, 0, 10), released('k', 1n, 20, 30), timedOut('k', 40, 50, { client: 1 })], 'false-timeout');
    expect(v.anomalies[0]!.ops.map((o) => o.outcome)).toEqual(['timeout', 'released']);
  });

  it('finds a T on a key nobody ever held, and one after the lease surely ended', () => {
    expectAnomaly([timedOut('k', 0, 10)], 'false-timeout');
    expectAnomaly([granted('k', 1n, 0, 10), timedOut('k', 1300, 1310, { client: 1 })], 'false-timeout');
  });

  it('finds a token going backwards on one key', () => {
    const v = expectAnomaly([granted('k', 5n, 0, 10), released('k', 5n, 20, 30), granted('k', 3n, 40, 50, { client: 1 })], 'token-not-increasing');
    // The same grants also break the real-time order of tokens.
    expect(v.anomalies.map((a) => a.kind).sort()).toEqual(['token-not-increasing', 'token-order']);
  });

  it('finds duplicate tokens across keys', () => {
    const v = expectAnomaly([granted('a', 7n, 0, 10), granted('b', 7n, 20, 30, { client: 1 })], 'duplicate-token');
    expect(v.anomalies).toHaveLength(1);
    expect(v.anomalies[0]!.message).toBe('token 7 was granted twice (keys "a" and "b")');
  });

  it('finds a smaller token granted after a larger one was received, across keys', () => {
    const a = granted('a', 9n, 0, 10);
    const b = granted('b', 8n, 20, 30, { client: 1 });
    const v = expectAnomaly([a, b], 'token-order');
    expect(v.anomalies[0]!.ops).toEqual([b, a]);
  });

  it('finds R (released) for a token that never held the key', () => {
    const v = expectAnomaly([granted('k', 1n, 0, 10), released('k', 42n, 20, 30, 1)], 'false-release');
    expect(v.anomalies[0]!.message).toContain('token 42 was never granted on this key');
  });

  it('finds R after the lease surely ended, and R for a token already released', () => {
    expectAnomaly([granted('k', 1n, 0, 10), released('k', 1n, 1300, 1400)], 'false-release');
    expectAnomaly([granted('k', 1n, 0, 10), released('k', 1n, 20, 30), released('k', 1n, 40, 50)], 'false-release');
  });

  it('finds N for the holder’s token while its lease surely runs', () => {
    expectAnomaly([granted('k', 1n, 0, 10), notHeld('k', 1n, 500, 600)], 'false-not-held');
  });

  it('finds the conflict when a T proves an unknown acquire took effect and its lease then blocks a grant', () => {
    expectAnomaly([acquireUnknown('k', 0), timedOut('k', 10, 20, { client: 1 }), granted('k', 5n, 500, 510, { client: 2 })], 'double-grant');
  });

  it('does not let an unknown release of another token free the key', () => {
    expectAnomaly([granted('k', 1n, 0, 10, { lease: 10_000 }), releaseUnknown('k', 2n, 20), granted('k', 3n, 30, 40, { client: 1 })], 'double-grant');
  });

  it('reports the first bad place of each key, and every key checked', () => {
    const v = check([
      granted('a', 1n, 0, 10, { lease: 5000 }),
      granted('a', 2n, 20, 30, { lease: 5000, client: 1 }),
      granted('b', 3n, 40, 50, { lease: 5000 }),
      granted('b', 4n, 60, 70, { lease: 5000, client: 1 }),
      granted('c', 5n, 80, 90),
    ]);
    expect(v.keysChecked).toBe(3);
    expect(v.anomalies.map((a) => `${a.key}:${a.kind}`)).toEqual(['a:double-grant', 'b:double-grant']);
  });
});

describe('budget and input', () => {
  it('reports inconclusive instead of searching past its budget', () => {
    const v = check([granted('k', 1n, 0, 10), released('k', 1n, 20, 30), granted('k', 2n, 40, 50)], { maxStepsPerKey: 2 });
    expect(v.inconclusive).toBe(true);
    expect(v.ok).toBe(false);
    expect(v.anomalies).toEqual([]);
    expect(v.inconclusiveKeys).toEqual(['k']);
    expect(formatVerdict(v)).toMatch(/verdict: inconclusive/);
  });

  it('rejects a malformed history with the index of the bad operation', () => {
    const bad = { ...granted('k', 1n, 10, 5) };
    expect(() => check([granted('k', 1n, 0, 1), bad])).toThrow('history[1]: completedAt must be a number not below invokedAt');
    expect(() => check([{ ...acquireUnknown('k', 0), completedAt: 3 }])).toThrow('history[0]: an unknown outcome has no completedAt');
  });
});

describe('step-down T and ghost releases', () => {
  it('a T that came long before its wait could run out (a node stepping down) observes nothing', () => {
    const free = [granted('k', 1n, 0, 10, { lease: 100 }), released('k', 1n, 20, 30)];
    // A wait that ran out on a free key cannot be explained...
    expectAnomaly([...free, timedOut('k', 100, 110, { wait: 50, client: 1 })], 'false-timeout');
    // ...but a T 4.9 s early is a step-down's: nothing was granted, nothing was seen.
    expectLinearizable([...free, timedOut('k', 100, 110, { wait: 5_000, client: 1 })]);
  });

  it('with ghostReleases, an unknown acquire may have been released at once by the server', () => {
    const history = [acquireUnknown('k', 0, { lease: 10_000 }), timedOut('k', 10, 20, { client: 1 }), granted('k', 5n, 500, 510, { client: 2 })];
    expectAnomaly(history, 'double-grant');
    expectLinearizable(history, { ghostReleases: true });
  });
});
