/**
 * The history format: what each client asked, when, and what it was told.
 *
 * Times are the recording process's monotonic milliseconds
 * (`performance.now()`). An operation whose outcome the client does not know
 * (connection lost, no reply in time) is `unknown` and has no completion: it
 * may have taken effect at any time after its invocation, or never.
 */

interface OperationBase {
  /** Who issued it (a client number or name); only for reports. */
  readonly client: number | string;
  readonly key: string;
  readonly invokedAt: number;
  /** Undefined exactly when the outcome is `unknown`. */
  readonly completedAt: number | undefined;
}

export interface AcquireBase extends OperationBase {
  readonly op: 'acquire';
  readonly waitMs: number;
  readonly leaseMs: number;
}

export type AcquireOp =
  | (AcquireBase & { readonly outcome: 'granted'; readonly token: bigint })
  | (AcquireBase & { readonly outcome: 'timeout' | 'busy' | 'unknown' });

export interface ReleaseOp extends OperationBase {
  readonly op: 'release';
  readonly token: bigint;
  readonly outcome: 'released' | 'not-held' | 'unknown';
}

/**
 * `X key token lease`: `extended` (reply X: that token's grant now has a
 * lease of `leaseMs` from the moment the server took it), `not-extended`
 * (reply G: the token was not the current grant, or its lease had run out).
 */
export interface ExtendOp extends OperationBase {
  readonly op: 'extend';
  readonly token: bigint;
  readonly leaseMs: number;
  readonly outcome: 'extended' | 'not-extended' | 'unknown';
}

export type Operation = AcquireOp | ReleaseOp | ExtendOp;
export type History = readonly Operation[];

export type GrantedOp = Extract<AcquireOp, { outcome: 'granted' }>;

export function isGrant(op: Operation): op is GrantedOp {
  return op.op === 'acquire' && op.outcome === 'granted';
}

/** Why `op` is not a well-formed history entry, or undefined when it is. */
export function operationError(op: Operation): string | undefined {
  if (!Number.isFinite(op.invokedAt)) return 'invokedAt must be a finite number';
  if (op.outcome === 'unknown') {
    if (op.completedAt !== undefined) return 'an unknown outcome has no completedAt';
  } else if (op.completedAt === undefined || !Number.isFinite(op.completedAt) || op.completedAt < op.invokedAt) {
    return 'completedAt must be a number not below invokedAt';
  }
  if (op.op === 'acquire') {
    if (!(op.leaseMs > 0)) return 'leaseMs must be positive';
    if (!(op.waitMs >= 0)) return 'waitMs must be 0 or more';
    if (!['granted', 'timeout', 'busy', 'unknown'].includes(op.outcome)) return `bad acquire outcome ${String(op.outcome)}`;
    if (op.outcome === 'granted' && typeof op.token !== 'bigint') return 'a grant needs a bigint token';
  } else if (op.op === 'release') {
    if (!['released', 'not-held', 'unknown'].includes(op.outcome)) return `bad release outcome ${String(op.outcome)}`;
    if (typeof op.token !== 'bigint') return 'a release needs a bigint token';
  } else if (op.op === 'extend') {
    if (!['extended', 'not-extended', 'unknown'].includes(op.outcome)) return `bad extend outcome ${String(op.outcome)}`;
    if (typeof op.token !== 'bigint') return 'an extension needs a bigint token';
    if (!(op.leaseMs > 0)) return 'leaseMs must be positive';
  } else {
    return `unknown op ${String((op as { op: unknown }).op)}`;
  }
  return undefined;
}

/** One line of JSON per operation, tokens as decimal strings (JSON has no bigint). */
export function operationToJson(op: Operation): string {
  return JSON.stringify(op, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
}

/** The inverse of operationToJson; throws on a malformed line. */
export function operationFromJson(line: string): Operation {
  const raw = JSON.parse(line) as Record<string, unknown>;
  const op = { ...raw } as Record<string, unknown>;
  if (typeof raw.token === 'string') op.token = BigInt(raw.token);
  const error = operationError(op as unknown as Operation);
  if (error !== undefined) throw new Error(`bad history line (${error}): ${line}`);
  return op as unknown as Operation;
}
