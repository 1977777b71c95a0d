/**
 * The sequential specification of one key of the lock (PROTOCOL.md), with
 * time: the state after some operations have been placed in a linearization
 * order, and the step that places one more.
 *
 * - A grant takes effect at its point `g`; its lease may end at any time in
 *   [g + lease, g + lease + slack] (server timer resolution, clock rates).
 *   Expiry is not an operation: it is assumed to happen exactly when an
 *   observation needs it (a new grant, or `N` for the holder's token), and
 *   such an observation clears the holder, so no later operation can see the
 *   lease still running.
 * - `timeout` needs a holder whose lease had not surely ended; `busy` never
 *   reaches the model (always legal, no effect).
 * - `released` needs the holder's exact token, lease not surely ended; `N`
 *   for the holder's token needs a lease that could have ended; `N` for any
 *   other token changes nothing.
 * - `extended` needs the holder's exact token, lease not surely ended; the
 *   holder keeps its token and its lease starts again at the extension's
 *   point, with the extension's length (it may be shorter). `G` (not
 *   extended) is to an extension what `N` is to a release: for the holder's
 *   token it needs a lease that could have ended (and clears the holder),
 *   for any other token it changes nothing.
 * - Tokens of one key strictly increase in linearization order.
 * - Operations with an `unknown` outcome are placed only if they took effect:
 *   an acquire as a grant of an unknown token (held until its lease ends, as
 *   nobody can release a token nobody knows), a release as the end of the
 *   holder's grant when the tokens match (if they do not, it changed nothing
 *   and is simply never placed), an extension as a new lease for the holder
 *   when the tokens match.
 *
 * Operations that change nothing (`timeout`, `N` for a token that is not
 * the holder's) are observations: each needs one instant, in its interval
 * and between the last change and the next, at which its condition held.
 * They do not order each other, so the search does not try their orders.
 */
import type { Operation } from './history.js';
import { G, P, S, ZERO, Zone } from './zone.js';

/** An operation of one key, with its interval in integer microseconds. */
export interface KeyOp {
  readonly op: Operation;
  readonly inv: number;
  /** Infinity when the outcome is unknown. */
  readonly comp: number;
  /** The lease in microseconds (acquires and extensions; 0 for releases). */
  readonly leaseUs: number;
  /**
   * The least time its grant surely holds the key, when less than the lease:
   * 0 for an unknown acquire when the server may have released it at once
   * (its connection had closed: CheckOptions.ghostReleases).
   */
  readonly minHoldUs?: number;
  /**
   * How much later than the slack its lease (an acquire's, an extension's)
   * may end: the standstills it ran into (CheckOptions.standstills).
   */
  readonly lateUs?: number;
}

export interface LockState {
  /** Index (in the key's ops) of the grant holding the key, or -1 when free. */
  readonly holder: number;
  /**
   * Index of the operation whose lease the holder runs on now: the grant,
   * or the last extension placed (-1 when free). Clock G is that lease's start.
   */
  readonly leaseOp: number;
  /** Highest token granted so far in this order (0n: none). */
  readonly lastToken: bigint;
  /** Possible values of the holder's grant point, the last change and the next one. */
  readonly zone: Zone;
}

export const INITIAL_STATE: LockState = { holder: -1, leaseOp: -1, lastToken: 0n, zone: Zone.initial() };

/** The part of a state that must match exactly for one state to cover another (the zones may nest). */
export function stateKey(s: LockState): string {
  return `${s.holder}|${s.leaseOp}|${s.lastToken}`;
}

/** How long the holder's current lease is (0 when free). */
export function holderLeaseUs(s: LockState, ops: readonly KeyOp[]): number {
  return s.leaseOp >= 0 ? ops[s.leaseOp]!.leaseUs : 0;
}

/** The slack of the holder's current lease: the check's, and its own standstills. */
export function holderSlackUs(s: LockState, ops: readonly KeyOp[], slackUs: number): number {
  return slackUs + (s.leaseOp >= 0 ? (ops[s.leaseOp]!.lateUs ?? 0) : 0);
}

/** The holder's token, or undefined when free or when the holder is an unknown acquire. */
export function holderToken(s: LockState, ops: readonly KeyOp[]): bigint | undefined {
  if (s.holder < 0) return undefined;
  const op = ops[s.holder]!.op;
  return op.op === 'acquire' && op.outcome === 'granted' ? op.token : undefined;
}

/** True if placing `op` now changes nothing (an observation). */
export function observes(s: LockState, ops: readonly KeyOp[], op: Operation): boolean {
  if (op.op === 'acquire') return op.outcome === 'timeout';
  return (op.outcome === 'not-held' || op.outcome === 'not-extended') && holderToken(s, ops) !== op.token;
}

/**
 * The zone with `k`'s interval applied: for an observation, some instant in
 * it lies at or after the last change and at or before the next; otherwise
 * `k` is the next change.
 */
export function zoneAt(s: LockState, k: KeyOp, observation: boolean): Zone {
  const z = s.zone.clone();
  if (observation) {
    z.bound(S, ZERO, k.comp);
    z.bound(ZERO, P, -k.inv);
  } else {
    z.bound(P, ZERO, k.comp);
    z.bound(ZERO, P, -k.inv);
  }
  return z;
}

/** Places `ops[i]` next. Returns the new state, or undefined when that is impossible. */
export function step(s: LockState, ops: readonly KeyOp[], i: number, slackUs: number): LockState | undefined {
  const k = ops[i]!;
  const op = k.op;
  const observation = observes(s, ops, op);
  const z = zoneAt(s, k, observation);
  const holderLease = holderLeaseUs(s, ops);
  const slack = holderSlackUs(s, ops, slackUs);
  if (observation) {
    if (op.op === 'acquire') {
      // T: at that instant x the lease was not surely over: S <= x <= G + lease + slack, x >= inv.
      if (s.holder < 0) return undefined;
      z.bound(S, G, holderLease + slack);
      z.bound(ZERO, G, holderLease + slack - k.inv);
    }
    return z.close() ? { holder: s.holder, leaseOp: s.leaseOp, lastToken: s.lastToken, zone: z } : undefined;
  }
  if (op.op === 'acquire') {
    // granted, or unknown taking effect as a grant (busy never gets here).
    const token = op.outcome === 'granted' ? op.token : undefined;
    if (token !== undefined && token <= s.lastToken) return undefined;
    // An unknown grant the server may have released at once holds the key only as long as its own lease says.
    if (s.holder >= 0) z.bound(G, P, -((s.leaseOp === s.holder ? ops[s.holder]!.minHoldUs : undefined) ?? holderLease));
    if (!z.close()) return undefined;
    z.changedAtP('granted');
    return { holder: i, leaseOp: i, lastToken: token ?? s.lastToken, zone: z };
  }
  // A release or an extension naming the holder's token (anything else was an observation above).
  if (holderToken(s, ops) !== op.token) return undefined; // released/extended, or unknown: it needs the holder
  const extension = op.op === 'extend' && op.outcome !== 'not-extended';
  // Released, or extended (answered or not: an extension never revives a lease that had ended).
  if (op.outcome === 'released' || extension) z.bound(P, G, holderLease + slack);
  else if (op.outcome !== 'unknown') z.bound(G, P, -holderLease); // N or G for the holder's token: its lease had ended
  if (!z.close()) return undefined;
  if (extension) {
    // The same holder, on a new lease from this point.
    z.changedAtP('granted');
    return { holder: s.holder, leaseOp: i, lastToken: s.lastToken, zone: z };
  }
  z.changedAtP('freed');
  return { holder: -1, leaseOp: -1, lastToken: s.lastToken, zone: z };
}

/**
 * Facts about one key's operations that let the search give up on an order
 * early. Grants with known tokens must be placed in token order (tokens
 * strictly increase), so only the next one in that order is ever a
 * candidate; `rank` is each grant's place in it (-1: not such a grant).
 */
export class KeyFacts {
  readonly rank: Int32Array;
  private readonly grantTokens = new Set<bigint>();

  constructor(ops: readonly KeyOp[]) {
    const grants: number[] = [];
    ops.forEach((k, i) => {
      if (k.op.op === 'acquire' && k.op.outcome === 'granted') grants.push(i);
    });
    const token = (i: number) => (ops[i]!.op as { token: bigint }).token;
    grants.sort((a, b) => (token(a) < token(b) ? -1 : token(a) > token(b) ? 1 : ops[a]!.inv - ops[b]!.inv));
    this.rank = new Int32Array(ops.length).fill(-1);
    grants.forEach((i, r) => {
      this.rank[i] = r;
      this.grantTokens.add(token(i));
    });
  }

  /**
   * True if the completed operation `ops[i]` can no longer be placed after
   * state `s`, whatever comes next: its interval ended before the last
   * change (or, for a change, before the next one can be), its token is
   * behind, or it releases a grant that is over. A necessary condition
   * only; the search still tries what passes it.
   */
  hopeless(s: LockState, ops: readonly KeyOp[], i: number): boolean {
    const k = ops[i]!;
    const op = k.op;
    // T, N and G can be observations, which need an instant after the last change only.
    if (op.outcome === 'timeout' || op.outcome === 'not-held' || op.outcome === 'not-extended') return k.comp < -s.zone.get(ZERO, S);
    if (k.comp < -s.zone.get(ZERO, P)) return true;
    if (op.op === 'acquire') return op.outcome === 'granted' && op.token <= s.lastToken;
    // released or extended: its grant is the holder, or still to come.
    return holderToken(s, ops) !== op.token && !(this.grantTokens.has(op.token) && op.token > s.lastToken);
  }
}
