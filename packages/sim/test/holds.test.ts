/** The simulator's mutual-exclusion check: two clients believing they hold one key at once. */
import { describe, expect, it } from 'vitest';
import { findOverlap, type Hold } from '../src/library-client.js';

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
