/**
 * check(history): is this lock history linearizable?
 *
 * P-compositionality: a history is linearizable iff each key's sub-history
 * is, so each key is searched on its own; the token rules that span keys are
 * checked separately (tokens.ts).
 */
import { operationError, type History, type Operation } from './history.js';
import { explain, type KeyOp } from './lock-model.js';
import { findDoubleGrant } from './double-grant.js';
import { relevantOps } from './reduce.js';
import { searchKey } from './search.js';
import { checkTokens } from './tokens.js';
import type { Anomaly, Verdict } from './verdict.js';

export interface CheckOptions {
  /** How late a lease may end after `grant point + lease` (server timer resolution, clock rates). Default 250 ms. */
  readonly slackMs?: number;
  /** Most the recording clients' clocks may disagree (they share one clock when in one process). Default 0. */
  readonly clockSkewMs?: number;
  /** Search steps allowed per key before it is reported inconclusive. Default 5,000,000. */
  readonly maxStepsPerKey?: number;
  /** Time allowed for the whole check before the keys left are reported inconclusive. Default 60 s. */
  readonly timeLimitMs?: number;
}

export const DEFAULT_SLACK_MS = 250;

export function check(history: History, options: CheckOptions = {}): Verdict {
  const started = performance.now();
  const slackUs = Math.round((options.slackMs ?? DEFAULT_SLACK_MS) * 1000);
  const skewMs = options.clockSkewMs ?? 0;
  const maxSteps = options.maxStepsPerKey ?? 5_000_000;
  const deadline = started + (options.timeLimitMs ?? 60_000);

  history.forEach((op, i) => {
    const error = operationError(op);
    if (error !== undefined) throw new TypeError(`history[${i}]: ${error}`);
  });
  const origin = history.reduce((min, op) => Math.min(min, op.invokedAt), Infinity);
  const byKey = partitionByKey(history, origin, skewMs);

  const anomalies: Anomaly[] = [];
  const inconclusiveKeys: string[] = [];
  let steps = 0;
  for (const [key, ops] of byKey) {
    const double = findDoubleGrant(ops);
    if (double !== undefined) {
      anomalies.push(doubleGrantAnomaly(key, ops, double.first, double.second));
      continue;
    }
    const result = searchKey(ops, slackUs, { maxSteps, deadline });
    steps += result.steps;
    if (result.verdict === 'inconclusive') inconclusiveKeys.push(key);
    if (result.verdict !== 'violation') continue;
    const why = explain(result.state, ops, result.order, result.blocked, slackUs);
    anomalies.push({ key, kind: why.kind, message: why.message, ops: [result.blocked, ...why.related].map((i) => ops[i]!.op) });
  }
  anomalies.push(...checkTokens(history, skewMs));
  return {
    ok: anomalies.length === 0 && inconclusiveKeys.length === 0,
    inconclusive: inconclusiveKeys.length > 0,
    keysChecked: byKey.size,
    operations: history.length,
    anomalies,
    inconclusiveKeys,
    steps,
    elapsedMs: performance.now() - started,
    origin: origin === Infinity ? 0 : origin,
  };
}

function doubleGrantAnomaly(key: string, ops: readonly KeyOp[], first: number, second: number): Anomaly {
  const a = ops[first]!;
  const b = ops[second]!;
  const ms = (us: number) => `${(us / 1000).toFixed(1)} ms`;
  const token = (k: KeyOp) => (k.op as { token: bigint }).token;
  return {
    key,
    kind: 'double-grant',
    message:
      `granted while token ${token(a)} still held the key: no release of token ${token(a)} could have come between, ` +
      `and its lease cannot have ended before ${ms(a.inv + a.leaseUs)}, but this grant completed at ${ms(b.comp)}`,
    ops: [b.op, a.op],
  };
}

/**
 * Each key's operations as the search wants them: intervals in integer
 * microseconds from `origin`, widened by the clock skew allowance, without
 * those that cannot constrain anything (reduce.ts).
 */
export function partitionByKey(history: History, origin: number, skewMs: number): Map<string, KeyOp[]> {
  const byKey = new Map<string, KeyOp[]>();
  for (const op of history) {
    let ops = byKey.get(op.key);
    if (ops === undefined) byKey.set(op.key, (ops = []));
    ops.push(toKeyOp(op, origin, skewMs));
  }
  for (const [key, ops] of byKey) byKey.set(key, relevantOps(ops));
  return byKey;
}

function toKeyOp(op: Operation, origin: number, skewMs: number): KeyOp {
  return {
    op,
    inv: Math.floor((op.invokedAt - origin - skewMs) * 1000),
    comp: op.completedAt === undefined ? Infinity : Math.ceil((op.completedAt - origin + skewMs) * 1000),
    leaseUs: op.op === 'acquire' ? Math.round(op.leaseMs * 1000) : 0,
  };
}
