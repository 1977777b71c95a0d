/** What the checker concludes about a history. */
import type { Operation } from './history.js';
import type { ViolationKind } from './explain.js';

export type AnomalyKind = ViolationKind | 'duplicate-token' | 'token-order';

export interface Anomaly {
  /** The key, for anomalies found by the per-key search. */
  readonly key?: string;
  readonly kind: AnomalyKind;
  readonly message: string;
  /** The evidence: the operation that cannot be explained first, then those that show why. */
  readonly ops: readonly Operation[];
}

export interface Verdict {
  /** Linearizable, and the search finished on every key. */
  readonly ok: boolean;
  /** The search ran out of budget on some key (see inconclusiveKeys). */
  readonly inconclusive: boolean;
  readonly keysChecked: number;
  readonly operations: number;
  readonly anomalies: readonly Anomaly[];
  readonly inconclusiveKeys: readonly string[];
  /** Search steps over all keys, and how long the check took. */
  readonly steps: number;
  readonly elapsedMs: number;
  /** The earliest invocation: times in messages and reports count from it. */
  readonly origin: number;
}
