/**
 * What the clients saw, checked at the end of a run beside the history's
 * linearizability: mutual exclusion as each client believed it, and the
 * fencing promise across keys.
 */
import type { Operation } from '@ticketing/checker';

/** A granted acquire. */
export type Grant = Extract<Operation, { outcome: 'granted' }>;

/** A time during which one client believed it held `key` (a valid ticket, or an unreleased grant within its lease). */
export interface Hold {
  readonly client: string;
  readonly key: string;
  readonly token: bigint;
  readonly from: number;
  to: number;
}

/**
 * Mutual exclusion as the clients saw it: no two holds of one key overlap.
 * Returns a description of the first overlap, or undefined.
 */
export function findOverlap(holds: readonly Hold[]): string | undefined {
  const byKey = new Map<string, Hold[]>();
  for (const h of holds) if (h.to > h.from) (byKey.get(h.key) ?? byKey.set(h.key, []).get(h.key)!).push(h);
  for (const [key, list] of byKey) {
    list.sort((a, b) => a.from - b.from);
    for (let i = 1; i < list.length; i++) {
      const [a, b] = [list[i - 1]!, list[i]!];
      if (b.from < a.to) {
        return `${a.client} held ${key} (token ${a.token}) from ${a.from.toFixed(1)} to ${a.to.toFixed(1)} ms, and ${b.client} was granted it (token ${b.token}) at ${b.from.toFixed(1)} ms`;
      }
    }
  }
  return undefined;
}

/**
 * The fencing promise over the whole run, restarts included, across keys:
 * tokens are unique, and a grant whose request came after another grant's
 * reply carries a larger token. `excused(a, b)` exempts the pair of grants
 * a (earlier reply) and b (later request) when the mode does not promise
 * their order (priority mode during a partition: docs/cluster.md).
 */
export function tokenViolation(history: readonly Operation[], excused: (a: Grant, b: Grant) => boolean = () => false): string | undefined {
  const grants = history.filter((op): op is Grant => op.op === 'acquire' && op.outcome === 'granted');
  const seen = new Map<bigint, Operation>();
  for (const op of grants) {
    const other = seen.get(op.token);
    if (other !== undefined) return `token ${op.token} was granted twice: to ${other.client} for ${other.key} and to ${op.client} for ${op.key}`;
    seen.set(op.token, op);
  }
  for (const a of grants) {
    for (const b of grants) {
      if (a.completedAt! < b.invokedAt && b.token <= a.token && !excused(a, b)) {
        return `${b.client} was granted ${b.key} with token ${b.token} at ${b.completedAt!.toFixed(1)} ms, not above token ${a.token} granted to ${a.client} for ${a.key} before it asked (${a.completedAt!.toFixed(1)} < ${b.invokedAt.toFixed(1)} ms)`;
      }
    }
  }
  return undefined;
}
