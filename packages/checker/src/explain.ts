/**
 * Why an operation cannot be placed: the text of an anomaly, for reports
 * only (never on the search's hot path). Times in messages are
 * milliseconds from the history's origin.
 */
import { holderLeaseUs, holderSlackUs, holderToken, observes, zoneAt, type KeyOp, type LockState } from './lock-model.js';
import { G, P, S, ZERO } from './zone.js';

export type ViolationKind =
  | 'double-grant'
  | 'token-not-increasing'
  | 'false-timeout'
  | 'false-release'
  | 'false-not-held'
  | 'false-extend'
  | 'false-not-extended'
  | 'not-linearizable';

export interface Explanation {
  readonly kind: ViolationKind;
  readonly message: string;
  /** Indices (in the key's ops) of the operations that show it, besides the one that failed. */
  readonly related: readonly number[];
}

/** Microseconds from the origin, as milliseconds for people. */
export function ms(us: number): string {
  return `${(us / 1000).toFixed(1)} ms`;
}

/**
 * Why `ops[i]` cannot be placed after `order` (which led to state `s`).
 * `order` is the linearization found so far, used to name the operation
 * that last freed the key.
 */
export function explain(s: LockState, ops: readonly KeyOp[], order: readonly number[], i: number, slackUs: number): Explanation {
  const k = ops[i]!;
  const op = k.op;
  const holder = s.holder >= 0 ? ops[s.holder]! : undefined;
  const holderText = holder === undefined ? '' : describeGrant(holder);
  // The holder's lease runs from G (its grant, or its last extension), for that operation's length.
  const holderLeaseEnd = (extra: number) => {
    const z = s.zone;
    const lease = holderLeaseUs(s, ops);
    return { earliest: -z.get(ZERO, G) + lease + extra, latest: z.get(G, ZERO) + lease + extra };
  };
  const extended = s.leaseOp >= 0 && s.leaseOp !== s.holder ? ` (extended by ${describeOp(ops[s.leaseOp]!)})` : '';
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
          message: `granted while ${holderText} still held the key: that lease${extended} cannot have ended before ${ms(holderLeaseEnd(0).earliest)}, and this grant completed at ${ms(k.comp)}`,
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
        message: `answered T (key held), but the lease of ${holderText}${extended} had surely ended by ${ms(holderLeaseEnd(holderSlackUs(s, ops, slackUs)).latest)}, and this acquire cannot have taken effect before ${ms(earliestHere)}`,
        related: [s.holder],
      };
    }
  } else if (op.outcome === 'released' || op.outcome === 'extended') {
    const [kind, answer] = op.outcome === 'released' ? (['false-release', 'R (released)'] as const) : (['false-extend', 'X (extended)'] as const);
    if (holderToken(s, ops) !== op.token) {
      const grant = ops.findIndex((o) => o.op.op === 'acquire' && o.op.outcome === 'granted' && o.op.token === op.token);
      const why = grant < 0 ? `token ${op.token} was never granted on this key` : holder === undefined ? 'nothing held the key' : `${holderText} held the key`;
      return {
        kind,
        message: `answered ${answer} for token ${op.token}, but ${why}`,
        related: [...(grant >= 0 ? [grant] : []), ...(holder !== undefined ? [s.holder] : [])],
      };
    }
    const revival = op.outcome === 'extended' ? ': an extension never revives a grant' : '';
    return {
      kind,
      message: `answered ${answer}, but the lease of ${holderText} had surely ended by ${ms(holderLeaseEnd(holderSlackUs(s, ops, slackUs)).latest)}${extended}${revival}`,
      related: [s.holder],
    };
  } else if (op.outcome === 'not-held' || op.outcome === 'not-extended') {
    const [kind, answer] = op.outcome === 'not-held' ? (['false-not-held', 'N (not held)'] as const) : (['false-not-extended', 'G (not extended)'] as const);
    return {
      kind,
      message: `answered ${answer} for the holder's own token while its lease was surely running (until at least ${ms(holderLeaseEnd(0).earliest)})${extended}`,
      related: [s.holder],
    };
  }
  return { kind: 'not-linearizable', message: 'no order of the operations explains it', related: order.length > 0 ? [order[order.length - 1]!] : [] };
}

function describeOp(k: KeyOp): string {
  const op = k.op;
  if (op.op === 'extend') return `an extension to ${op.leaseMs} ms${op.outcome === 'unknown' ? ' (outcome unknown)' : ''}`;
  return describeGrant(k);
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
    } else if (held && holderToken === op.token && op.outcome !== 'extended' && !(op.op === 'extend' && op.outcome === 'unknown')) {
      held = false;
      last = i;
    }
  }
  return held ? undefined : last;
}
