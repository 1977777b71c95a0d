/**
 * Fencing-token checks across keys, outside the per-key search: no token is
 * granted twice, and a grant that started after another grant had completed
 * (real time) carries a larger token.
 */
import type { Anomaly } from './verdict.js';
import { isGrant, type GrantedOp, type History } from './history.js';

export function checkTokens(history: History, clockSkewMs: number): Anomaly[] {
  const grants = history.filter(isGrant);
  const anomalies: Anomaly[] = [];

  const byToken = new Map<bigint, GrantedOp>();
  for (const g of grants) {
    const first = byToken.get(g.token);
    if (first === undefined) byToken.set(g.token, g);
    else anomalies.push({ kind: 'duplicate-token', message: `token ${g.token} was granted twice (keys "${first.key}" and "${g.key}")`, ops: [first, g] });
  }

  // Sweep grants by invocation; `highest` is the largest token among grants
  // that had completed before the current one was invoked.
  const byCompletion = [...grants].sort((a, b) => a.completedAt! - b.completedAt!);
  const byInvocation = [...grants].sort((a, b) => a.invokedAt - b.invokedAt);
  let j = 0;
  let highest: GrantedOp | undefined;
  for (const b of byInvocation) {
    while (j < byCompletion.length && byCompletion[j]!.completedAt! + clockSkewMs < b.invokedAt) {
      const a = byCompletion[j++]!;
      if (highest === undefined || a.token > highest.token) highest = a;
    }
    // Equal tokens are reported once, as duplicates.
    if (highest !== undefined && highest.token > b.token) {
      anomalies.push({
        kind: 'token-order',
        message: `token ${b.token} (key "${b.key}") is below token ${highest.token} (key "${highest.key}"), which had been granted and received before this acquire was sent`,
        ops: [b, highest],
      });
    }
  }
  return anomalies;
}
