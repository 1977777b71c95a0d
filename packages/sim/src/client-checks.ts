/**
 * What the clients saw, checked at the end of a run beside the history's
 * linearizability: mutual exclusion as each client believed it, and the
 * fencing promise across keys.
 */
import type { Operation } from '@ticketing/checker';

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
 * reply carries a larger token.
 */
export function tokenViolation(history: readonly Operation[]): string | undefined {
  const grants = history.filter((op): op is Extract<Operation, { outcome: 'granted' }> => op.op === 'acquire' && op.outcome === 'granted');
  const seen = new Map<bigint, Operation>();
  for (const op of grants) {
    const other = seen.get(op.token);
    if (other !== undefined) return `token ${op.token} was granted twice: to ${other.client} for ${other.key} and to ${op.client} for ${op.key}`;
    seen.set(op.token, op);
  }
  const byReply = [...grants].sort((a, b) => a.completedAt! - b.completedAt!);
  const byRequest = [...grants].sort((a, b) => a.invokedAt - b.invokedAt);
  let highest: (typeof grants)[number] | undefined;
  let i = 0;
  for (const op of byRequest) {
    for (; i < byReply.length && byReply[i]!.completedAt! < op.invokedAt; i++) {
      if (highest === undefined || byReply[i]!.token > highest.token) highest = byReply[i]!;
    }
    if (highest !== undefined && op.token <= highest.token) {
      return `${op.client} was granted ${op.key} with token ${op.token} at ${op.completedAt!.toFixed(1)} ms, not above token ${highest.token} granted to ${highest.client} for ${highest.key} before it asked (${highest.completedAt!.toFixed(1)} < ${op.invokedAt.toFixed(1)} ms)`;
    }
  }
  return undefined;
}
