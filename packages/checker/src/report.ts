/** Readable text for histories and verdicts (what `ticketing verify` prints). */
import type { History, Operation } from './history.js';
import type { Verdict } from './verdict.js';

function seconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}

/** One line per operation: who, what, outcome, and when (ms from `origin`). */
export function describeOperation(op: Operation, origin = 0): string {
  const at = (t: number) => (t - origin).toFixed(1);
  const what =
    op.op === 'acquire'
      ? `acquire ${op.key} wait ${seconds(op.waitMs)} lease ${seconds(op.leaseMs)} -> ${op.outcome === 'granted' ? `granted ${op.token}` : op.outcome}`
      : op.op === 'extend'
        ? `extend ${op.key} ${op.token} lease ${seconds(op.leaseMs)} -> ${op.outcome}`
        : `release ${op.key} ${op.token} -> ${op.outcome}`;
  const when = op.completedAt === undefined ? `invoked ${at(op.invokedAt)} ms, no reply` : `${at(op.invokedAt)} .. ${at(op.completedAt)} ms`;
  return `client ${op.client}: ${what}  [${when}]`;
}

/** Operation counts by kind and outcome, e.g. for the start of a report. */
export function summarizeOutcomes(history: History): string {
  const count = (op: Operation['op'], outcome?: string) => history.filter((o) => o.op === op && (outcome === undefined || o.outcome === outcome)).length;
  const line = (op: Operation['op'], outcomes: string[]) =>
    `  ${op.padEnd(8)} ${String(count(op)).padStart(7)}   ${outcomes.map((o) => `${o} ${count(op, o)}`).join(', ')}`;
  return [
    `operations: ${history.length}`,
    line('acquire', ['granted', 'timeout', 'busy', 'unknown']),
    line('release', ['released', 'not-held', 'unknown']),
    ...(count('extend') > 0 ? [line('extend', ['extended', 'not-extended', 'unknown'])] : []),
  ].join('\n');
}

/** The anomalies with their evidence, then one verdict line. At most `maxAnomalies` are spelled out. */
export function formatVerdict(verdict: Verdict, maxAnomalies = 20): string {
  const lines = [
    `checked ${verdict.keysChecked} key${verdict.keysChecked === 1 ? '' : 's'}, ${verdict.operations} operations in ${(verdict.elapsedMs / 1000).toFixed(2)} s (${verdict.steps} search steps)`,
  ];
  if (verdict.anomalies.length === 0) lines.push('anomalies: none');
  else lines.push(`anomalies: ${verdict.anomalies.length}`);
  verdict.anomalies.slice(0, maxAnomalies).forEach((a, n) => {
    lines.push(`  ${n + 1}. ${a.kind}${a.key === undefined ? '' : ` on key ${a.key}`}: ${a.message}`);
    for (const op of a.ops) lines.push(`       ${describeOperation(op, verdict.origin)}`);
  });
  if (verdict.anomalies.length > maxAnomalies) lines.push(`  ... and ${verdict.anomalies.length - maxAnomalies} more`);
  if (verdict.inconclusive) {
    lines.push(`inconclusive keys (search budget ran out): ${verdict.inconclusiveKeys.join(', ')}`);
  }
  lines.push(verdictLine(verdict));
  return lines.join('\n');
}

export function verdictLine(verdict: Verdict): string {
  if (verdict.anomalies.length > 0) {
    const n = verdict.anomalies.length;
    return `verdict: NOT linearizable (${n} anomal${n === 1 ? 'y' : 'ies'})`;
  }
  if (verdict.inconclusive) return 'verdict: inconclusive (no anomaly found, but the search did not finish)';
  return 'verdict: linearizable';
}
