/**
 * Leaves out of a key's search the operations that can never constrain it:
 *
 * - `busy`: always legal, no effect;
 * - `N` (not held) for a token that cannot be the holder at any instant of
 *   its interval: never granted on this key, or whose grant was surely over
 *   before the N was sent (a release of it, or a grant of a larger token,
 *   had completed), or surely not begun before the N completed. Such an N
 *   is true at every instant of its interval, and every instant lies between
 *   two changes of some linearization, so it fits wherever it is put.
 *
 * Most `N` answers in a workload are for stale tokens; removing them keeps
 * the search from trying where to put each.
 */
import type { KeyOp } from './lock-model.js';

export function relevantOps(ops: readonly KeyOp[]): KeyOp[] {
  const grants = new Map<bigint, KeyOp>();
  const releasedBy = new Map<bigint, number>();
  for (const k of ops) {
    const op = k.op;
    if (op.op === 'acquire' && op.outcome === 'granted') grants.set(op.token, k);
    if (op.op === 'release' && op.outcome === 'released') releasedBy.set(op.token, Math.min(k.comp, releasedBy.get(op.token) ?? Infinity));
  }
  // For each granted token, the earliest completion of a grant with a larger token.
  const byToken = [...grants].sort(([a], [b]) => (a < b ? 1 : a > b ? -1 : 0));
  const supersededBy = new Map<bigint, number>();
  let earliest = Infinity;
  for (const [token, k] of byToken) {
    supersededBy.set(token, earliest);
    earliest = Math.min(earliest, k.comp);
  }
  return ops.filter((k) => {
    const op = k.op;
    if (op.op === 'acquire') return op.outcome !== 'busy';
    if (op.outcome !== 'not-held') return true;
    const grant = grants.get(op.token);
    if (grant === undefined || grant.inv > k.comp) return false;
    return (releasedBy.get(op.token) ?? Infinity) >= k.inv && supersededBy.get(op.token)! >= k.inv;
  });
}
