/**
 * Leaves out of a key's search the operations that can never constrain it:
 *
 * - `busy`: always legal, no effect;
 * - a `T` that came more than STEP_DOWN_EARLY_MS before its wait could have
 *   run out: a node stepping down answers its waiting acquires `T`
 *   (PROTOCOL.md: nothing was granted), which says nothing about whether the
 *   key was held; like `busy` it is legal anywhere and changes nothing;
 * - `N` (not held) or `G` (not extended) for a token that cannot be the
 *   holder at any instant of its interval: never granted on this key, or
 *   whose grant was surely over before it was sent (a release of it, or a
 *   grant of a larger token, had completed), or surely not begun before it
 *   completed. Such an answer is true at every instant of its interval, and
 *   every instant lies between two changes of some linearization, so it
 *   fits wherever it is put.
 *
 * Most `N` and `G` answers in a workload are for stale tokens; removing
 * them keeps the search from trying where to put each.
 */
import type { KeyOp } from './lock-model.js';

/** A `T` this much earlier than its wait is a step-down's, not a wait that ran out (CLIENT.md uses the same 100 ms). */
export const STEP_DOWN_EARLY_MS = 100;

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
    if (op.op === 'acquire') {
      if (op.outcome === 'busy') return false;
      return !(op.outcome === 'timeout' && k.comp - k.inv < (op.waitMs - STEP_DOWN_EARLY_MS) * 1000);
    }
    if (op.outcome !== 'not-held' && op.outcome !== 'not-extended') return true;
    const grant = grants.get(op.token);
    if (grant === undefined || grant.inv > k.comp) return false;
    return (releasedBy.get(op.token) ?? Infinity) >= k.inv && supersededBy.get(op.token)! >= k.inv;
  });
}
