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
 * - Tokens of one key strictly increase in linearization order.
 * - Operations with an `unknown` outcome are placed only if they took effect:
 *   an acquire as a grant of an unknown token (held until its lease ends, as
 *   nobody can release a token nobody knows), a release as the end of the
 *   holder's grant when the tokens match (if they do not, it changed nothing
 *   and is simply never placed).
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
  /** The lease in microseconds (acquires; 0 for releases). */
  readonly leaseUs: number;
}

export interface LockState {
  /** Index (in the key's ops) of the grant holding the key, or -1 when free. */
  readonly holder: number;
  /** Highest token granted so far in this order (0n: none). */
  readonly lastToken: bigint;
  /** Possible values of the holder's grant point, the last change and the next one. */
  readonly zone: Zone;
}

export const INITIAL_STATE: LockState = { holder: -1, lastToken: 0n, zone: Zone.initial() };

/** The part of a state that must match exactly for one state to cover another (the zones may nest). */
export function stateKey(s: LockState): string {
  return `${s.holder}|${s.lastToken}`;
}

/** The holder's token, or undefined when free or when the holder is an unknown acquire. */
export function holderToken(s: LockState, ops: readonly KeyOp[]): bigint | undefined {
  if (s.holder < 0) return undefined;
  const op = ops[s.holder]!.op;
  return op.op === 'acquire' && op.outcome === 'granted' ? op.token : undefined;
}

/** True if placing `op` now changes nothing (an observation). */
function observes(s: LockState, ops: readonly KeyOp[], op: Operation): boolean {
  if (op.op === 'acquire') return op.outcome === 'timeout';
  return op.outcome === 'not-held' && holderToken(s, ops) !== op.token;
}

/**
 * The zone with `k`'s interval applied: for an observation, some instant in
 * it lies at or after the last change and at or before the next; otherwise
 * `k` is the next change.
 */
function zoneAt(s: LockState, k: KeyOp, observation: boolean): Zone {
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
  const holderLease = s.holder >= 0 ? ops[s.holder]!.leaseUs : 0;
  if (observation) {
    if (op.op === 'acquire') {
      // T: at that instant x the lease was not surely over: S <= x <= G + lease + slack, x >= inv.
      if (s.holder < 0) return undefined;
      z.bound(S, G, holderLease + slackUs);
      z.bound(ZERO, G, holderLease + slackUs - k.inv);
    }
    return z.close() ? { holder: s.holder, lastToken: s.lastToken, zone: z } : undefined;
  }
  if (op.op === 'acquire') {
    // granted, or unknown taking effect as a grant (busy never gets here).
    const token = op.outcome === 'granted' ? op.token : undefined;
    if (token !== undefined && token <= s.lastToken) return undefined;
    if (s.holder >= 0) z.bound(G, P, -holderLease);
    if (!z.close()) return undefined;
    z.changedAtP('granted');
    return { holder: i, lastToken: token ?? s.lastToken, zone: z };
  }
  // A release naming the holder's token (anything else was an observation above).
  if (holderToken(s, ops) !== op.token) return undefined; // released, or unknown: it needs the holder
  if (op.outcome === 'released') z.bound(P, G, holderLease + slackUs);
  else if (op.outcome === 'not-held') z.bound(G, P, -holderLease);
  if (!z.close()) return undefined;
  z.changedAtP('freed');
  return { holder: -1, lastToken: s.lastToken, zone: z };
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
    // T and N can be observations, which need an instant after the last change only.
    if (op.outcome === 'timeout' || op.outcome === 'not-held') return k.comp < -s.zone.get(ZERO, S);
    if (k.comp < -s.zone.get(ZERO, P)) return true;
    if (op.op === 'acquire') return op.outcome === 'granted' && op.token <= s.lastToken;
    // released: its grant is the holder, or still to come.
    return holderToken(s, ops) !== op.token && !(this.grantTokens.has(op.token) && op.token > s.lastToken);
  }
}

export type ViolationKind =
  | 'double-grant'
  | 'token-not-increasing'
  | 'false-timeout'
  | 'false-release'
  | 'false-not-held'
  | 'not-linearizable';

export interface Explanation {
  readonly kind: ViolationKind;
  readonly message: string;
  /** Indices (in the key's ops) of the operations that show it, besides the one that failed. */
  readonly related: readonly number[];
}

/**
 * Why `ops[i]` cannot be placed after `order` (which led to state `s`): for
 * reports only, off the search's hot path. `order` is the linearization
 * found so far, used to name the operation that last freed the key. Times
 * in messages are milliseconds from the history's origin.
 */
export function explain(s: LockState, ops: readonly KeyOp[], order: readonly number[], i: number, slackUs: number): Explanation {
  const k = ops[i]!;
  const op = k.op;
  const ms = (us: number) => `${(us / 1000).toFixed(1)} ms`;
  const holder = s.holder >= 0 ? ops[s.holder]! : undefined;
  const holderText = holder === undefined ? '' : describeGrant(holder);
  const holderLeaseEnd = (extra: number) => {
    const z = s.zone;
    return { earliest: -z.get(ZERO, G) + holder!.leaseUs + extra, latest: z.get(G, ZERO) + holder!.leaseUs + extra };
  };
  const lastFree = lastFreeing(ops, order);
  const observation = observes(s, ops, op);
  // Observations need an instant after the last change; changes come after every observation placed too.
  const earliestHere = Math.max(k.inv, -s.zone.get(ZERO, observation ? S : P));
  // The interval alone (real-time order) already rules it out.
  if (!zoneAt(s, k, observation).close()) {
    return {
      kind: 'not-linearizable',
      message: `no order of the operations explains it: it cannot take effect before ${ms(earliestHere)}, but completed at ${ms(k.comp)}`,
      related: order.length > 0 ? [order[order.length - 1]!] : [],
    };
  }
  if (op.op === 'acquire') {
    if (op.outcome === 'granted') {
      // Grants take effect in token order: one with a smaller token not placed yet blocks this one.
      const placed = new Set(order);
      const smaller = ops.findIndex(
        (o, j) => !placed.has(j) && o.op.op === 'acquire' && o.op.outcome === 'granted' && o.op.token > s.lastToken && o.op.token < op.token,
      );
      if (smaller >= 0) {
        const t = (ops[smaller]!.op as { token: bigint }).token;
        return {
          kind: 'token-not-increasing',
          message: `tokens of one key increase in the order grants take effect, but token ${t}, smaller than this grant's ${op.token}, cannot have taken effect before it`,
          related: [smaller],
        };
      }
    }
    if (op.outcome === 'granted' && op.token <= s.lastToken) {
      const earlier = ops.findIndex((o) => o.op.op === 'acquire' && o.op.outcome === 'granted' && o.op.token === s.lastToken);
      return {
        kind: 'token-not-increasing',
        message: `granted token ${op.token}, not above token ${s.lastToken} granted on this key before it`,
        related: earlier >= 0 ? [earlier] : [],
      };
    }
    if (op.outcome === 'granted' || op.outcome === 'unknown') {
      if (holder !== undefined) {
        return {
          kind: 'double-grant',
          message: `granted while ${holderText} still held the key: that lease cannot have ended before ${ms(holderLeaseEnd(0).earliest)}, and this grant completed at ${ms(k.comp)}`,
          related: [s.holder],
        };
      }
    } else if (op.outcome === 'timeout') {
      if (holder === undefined) {
        return {
          kind: 'false-timeout',
          message:
            lastFree === undefined
              ? 'answered T (key held) although nothing held the key'
              : 'answered T (key held) although the key had been freed and nothing held it',
          related: lastFree === undefined ? [] : [lastFree],
        };
      }
      return {
        kind: 'false-timeout',
        message: `answered T (key held), but the lease of ${holderText} had surely ended by ${ms(holderLeaseEnd(slackUs).latest)}, and this acquire cannot have taken effect before ${ms(earliestHere)}`,
        related: [s.holder],
      };
    }
  } else if (op.outcome === 'released') {
    if (holderToken(s, ops) !== op.token) {
      const grant = ops.findIndex((o) => o.op.op === 'acquire' && o.op.outcome === 'granted' && o.op.token === op.token);
      const why = grant < 0 ? `token ${op.token} was never granted on this key` : holder === undefined ? 'nothing held the key' : `${holderText} held the key`;
      return {
        kind: 'false-release',
        message: `answered R (released) for token ${op.token}, but ${why}`,
        related: [...(grant >= 0 ? [grant] : []), ...(holder !== undefined ? [s.holder] : [])],
      };
    }
    return {
      kind: 'false-release',
      message: `answered R (released), but the lease of ${holderText} had surely ended by ${ms(holderLeaseEnd(slackUs).latest)}`,
      related: [s.holder],
    };
  } else if (op.outcome === 'not-held') {
    return {
      kind: 'false-not-held',
      message: `answered N (not held) for the holder's own token while its lease was surely running (until at least ${ms(holderLeaseEnd(0).earliest)})`,
      related: [s.holder],
    };
  }
  return { kind: 'not-linearizable', message: 'no order of the operations explains it', related: order.length > 0 ? [order[order.length - 1]!] : [] };
}

function describeGrant(k: KeyOp): string {
  const op = k.op;
  if (op.op === 'acquire' && op.outcome === 'granted') return `token ${op.token}`;
  return `an acquire with unknown outcome (client ${op.client})`;
}

/** The last operation in `order` that left the key free (a release or an N that ended the holder's grant). */
function lastFreeing(ops: readonly KeyOp[], order: readonly number[]): number | undefined {
  let holderToken: bigint | undefined;
  let held = false;
  let last: number | undefined;
  for (const i of order) {
    const op = ops[i]!.op;
    if (op.op === 'acquire') {
      if (op.outcome === 'granted' || op.outcome === 'unknown') {
        held = true;
        holderToken = op.outcome === 'granted' ? op.token : undefined;
      }
    } else if (held && holderToken === op.token) {
      held = false;
      last = i;
    }
  }
  return held ? undefined : last;
}
