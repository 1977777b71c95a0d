/** The simulator's end-of-run checks of what clients saw: mutual exclusion, and the fencing promise across keys. */
import type { Operation } from '@ticketing/checker';
import { describe, expect, it } from 'vitest';
import { findOverlap, tokenViolation, type Hold } from '../src/client-checks.js';

const hold = (client: string, key: string, token: bigint, from: number, to: number): Hold => ({ client, key, token, from, to });

describe('findOverlap', () => {
  it('accepts holds of one key one after another, and of different keys at once', () => {
    expect(findOverlap([hold('a', 'k', 1n, 0, 100), hold('b', 'k', 2n, 100, 200), hold('c', 'j', 3n, 50, 150)])).toBeUndefined();
  });

  it('reports a grant inside another client\'s hold of the same key', () => {
    const found = findOverlap([hold('a', 'k', 1n, 0, 100), hold('c', 'j', 3n, 0, 10), hold('b', 'k', 2n, 99.5, 200)]);
    expect(found).toMatch(/a held k \(token 1\) from 0\.0 to 100\.0 ms, and b was granted it \(token 2\) at 99\.5 ms/);
  });

  it('ignores a hold that ended before it began (released at once, or granted after its lease)', () => {
    expect(findOverlap([hold('a', 'k', 1n, 50, 40), hold('b', 'k', 2n, 45, 60)])).toBeUndefined();
  });
});

const grant = (client: string, key: string, token: bigint, invokedAt: number, completedAt: number): Operation => ({
  client,
  key,
  op: 'acquire',
  waitMs: 0,
  leaseMs: 1000,
  invokedAt,
  completedAt,
  outcome: 'granted',
  token,
});

describe('tokenViolation', () => {
  it('accepts tokens that grow in real time across keys, and any order among overlapping requests', () => {
    expect(tokenViolation([grant('a', 'k', 10n, 0, 5), grant('b', 'j', 11n, 6, 8), grant('c', 'k', 30n, 7, 20), grant('d', 'j', 20n, 9, 12)])).toBeUndefined();
  });

  it('reports a token granted twice, on any keys', () => {
    expect(tokenViolation([grant('a', 'k', 10n, 0, 5), grant('b', 'j', 10n, 6, 8)])).toMatch(/token 10 was granted twice/);
  });

  it('reports a smaller token granted after a larger one was seen, across keys (a restart that forgot)', () => {
    expect(tokenViolation([grant('a', 'k', 50n, 0, 5), grant('b', 'j', 20n, 6, 8)])).toMatch(/b was granted j with token 20 .* not above token 50/);
  });
});

describe('tokenViolation with an excuse (priority mode: a partition)', () => {
  it('excuses a smaller later token only when the excuse covers the pair', () => {
    const history = [grant('a', 'k', 50n, 0, 5), grant('b', 'k', 20n, 6, 8)];
    expect(tokenViolation(history, (a, b) => a.invokedAt <= 7 && b.completedAt! >= 7)).toBeUndefined();
    expect(tokenViolation(history, (a, b) => a.invokedAt <= 100 && b.completedAt! >= 100)).toMatch(/not above token 50/);
  });
});
