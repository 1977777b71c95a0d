/**
 * The commands that change lock state, and what applying them returns
 * (seed 001). These are what replication ships or commits, in order.
 */
/** A fencing token: an unsigned 64-bit integer, kept exact. */
export type Token = bigint;

/** One held lock, as the lock table keeps it (and a granted result returns). */
export class LockRecord {
  /**
   * The named client identity that acquired it (undefined: a bare client
   * token, or none). Replicated state: only that identity may release it.
   */
  owner: string | undefined = undefined;

  constructor(
    readonly key: string,
    readonly token: Token,
    readonly leaseMs: number,
  ) {}
}

export type Command =
  /** Grant `key` for `leaseMs`; the token is assigned when this is applied. */
  | { readonly type: 'grant'; readonly key: string; readonly leaseMs: number; readonly owner?: string }
  /** Release exactly the grant of `key` holding `token`. */
  | { readonly type: 'release'; readonly key: string; readonly token: Token }
  /** End the grant of `key` holding `token` because its lease ran out; a late or repeated one is harmless. */
  | { readonly type: 'expire'; readonly key: string; readonly token: Token }
  /**
   * Beyond seed 001: the grant of `key` holding `token` keeps its token and
   * gets a new lease of `leaseMs` (each node counts it on its own clock from
   * when it applies this). A late one for a grant that expired or was
   * released (an Expire or Release applied before it) finds another token or
   * none, and changes nothing: an extension never revives a grant.
   */
  | { readonly type: 'extend'; readonly key: string; readonly token: Token; readonly leaseMs: number }
  /**
   * Beyond seed 001: every later token is at least `atLeast`. Issued when a
   * node starts (token high-water, Unix microseconds) and when a node is
   * promoted (a new epoch), so tokens never repeat nor go back.
   */
  | { readonly type: 'token-floor'; readonly atLeast: Token }
  /** Changes nothing (a new Raft leader's first entry). */
  | { readonly type: 'noop' };

export type Result<R extends LockRecord = LockRecord> =
  | { readonly type: 'granted'; readonly token: Token; readonly record: R }
  /** A Grant for a key that is already held (defensive; the engine never asks for one). */
  | { readonly type: 'grant-rejected' }
  | { readonly type: 'released' }
  /** A Release for a key that is not held under that token. */
  | { readonly type: 'not-found' }
  /** `existed`: whether the Expire actually removed a grant. */
  | { readonly type: 'expired'; readonly existed: boolean }
  /** The Extend's grant with its new lease (`record`, which replaces `previous` in the table). */
  | { readonly type: 'extended'; readonly record: R; readonly previous: R }
  /** An Extend for a key that is not held under that token. */
  | { readonly type: 'not-extended' }
  | { readonly type: 'noop' };
