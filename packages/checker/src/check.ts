/**
 * check(history): is this lock history linearizable?
 *
 * P-compositionality: a history is linearizable iff each key's sub-history
 * is, so each key is searched on its own; the token rules that span keys are
 * checked separately (tokens.ts).
 */
import { operationError, type History, type Operation } from './history.js';
import { explain } from './explain.js';
import type { KeyOp } from './lock-model.js';
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
  /**
   * An acquire with an unknown outcome may have been granted and released at
   * once by the server (PROTOCOL.md: a grant to a connection that has closed
   * is released at once), so it need not hold the key for its lease. True
   * for a recorder whose unknown acquires all come from closed connections
   * (the simulator); it widens the search. Default false.
   */
  readonly ghostReleases?: boolean;
  /** Time allowed for the whole check before the keys left are reported inconclusive. Default 60 s. */
  readonly timeLimitMs?: number;
  /**
   * Stretches [from, to] (ms, the history's clock) during which nothing ran
   * anywhere while the clocks ran on: the whole system was suspended (the
   * simulator's time warps). Nothing could end a lease in one, and after it
   * the servers need their usual slack again (a leader elected, a node
   * restarted with a fresh lease for what it recovers), so a lease whose
   * time ran into one may end that much later. Default none.
   */
  readonly standstills?: ReadonlyArray<readonly [number, number]>;
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
  const byKey = partitionByKey(history, origin, skewMs, options.ghostReleases === true, { slackMs: options.slackMs ?? DEFAULT_SLACK_MS, standstills: options.standstills ?? [] });

  const anomalies: Anomaly[] = [];
  const inconclusiveKeys: string[] = [];
  let steps = 0;
  for (const [key, ops] of byKey) {
    let failure = findDoubleGrant(ops);
    if (failure === undefined) {
      const result = searchKey(ops, slackUs, { maxSteps, deadline });
      steps += result.steps;
      if (result.verdict === 'inconclusive') inconclusiveKeys.push(key);
      if (result.verdict === 'violation') failure = { blocked: result.blocked, why: explain(result.state, ops, result.order, result.blocked, slackUs) };
    }
    if (failure === undefined) continue;
    const { blocked, why } = failure;
    anomalies.push({ key, kind: why.kind, message: why.message, ops: [blocked, ...why.related].map((i) => ops[i]!.op) });
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

/**
 * Each key's operations as the search wants them: intervals in integer
 * microseconds from `origin`, widened by the clock skew allowance, without
 * those that cannot constrain anything (reduce.ts).
 */
export function partitionByKey(
  history: History,
  origin: number,
  skewMs: number,
  ghostReleases = false,
  stood: { slackMs: number; standstills: ReadonlyArray<readonly [number, number]> } = { slackMs: 0, standstills: [] },
): Map<string, KeyOp[]> {
  const byKey = new Map<string, KeyOp[]>();
  const standstills = [...stood.standstills].sort((a, b) => a[0] - b[0]);
  for (const op of history) {
    let ops = byKey.get(op.key);
    if (ops === undefined) byKey.set(op.key, (ops = []));
    const stoodMs = op.op === 'release' ? 0 : standingStill(op.invokedAt, op.leaseMs + stood.slackMs, standstills);
    ops.push(toKeyOp(op, origin, skewMs, ghostReleases, stoodMs));
  }
  for (const [key, ops] of byKey) byKey.set(key, relevantOps(ops));
  return byKey;
}

/**
 * Clocks that disagree by at most `skewMs` pairwise are each within half of
 * it of a common reference, so widening every interval by half on each side
 * covers them (and matches the token check: A before B when A's completion
 * + skew < B's invocation).
 */
function toKeyOp(op: Operation, origin: number, skewMs: number, ghostReleases: boolean, stoodMs: number): KeyOp {
  return {
    op,
    inv: Math.floor((op.invokedAt - origin - skewMs / 2) * 1000),
    comp: op.completedAt === undefined ? Infinity : Math.ceil((op.completedAt - origin + skewMs / 2) * 1000),
    leaseUs: op.op === 'release' ? 0 : Math.round(op.leaseMs * 1000),
    ...(stoodMs > 0 ? { lateUs: Math.round(stoodMs * 1000) } : {}),
    ...(ghostReleases && op.op === 'acquire' && op.outcome === 'unknown' ? { minHoldUs: 0 } : {}),
  };
}

/**
 * How long the standstills that began while a lease of `windowMs` (its
 * lease and the slack) counted from `from` could still run lasted in all:
 * each one moves the end of that window out by its length.
 */
function standingStill(from: number, windowMs: number, standstills: ReadonlyArray<readonly [number, number]>): number {
  let end = from + windowMs;
  let stood = 0;
  for (const [a, b] of standstills) {
    if (a < from || a > end) continue;
    stood += b - a;
    end += b - a;
  }
  return stood;
}
