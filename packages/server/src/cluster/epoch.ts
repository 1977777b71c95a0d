/**
 * Fencing-token layout in a priority cluster:
 *
 *   token = epoch << 40 | counter        (epoch: 24 bits, counter: 40 bits)
 *
 * A node that becomes active starts a new epoch: the smallest epoch above
 * every epoch it has seen whose remainder modulo MAX_NODES is its own index
 * in the peers list. So every token of a later promotion is larger than every
 * token of an earlier one (even tokens that never reached the standby before
 * a crash), and two nodes active at once during a partition never issue the
 * same token: their epochs differ in the low bits.
 *
 * A single node (no cluster) just counts from its floor: the same layout
 * reads its tokens as "epoch floor(token / 2^40)".
 */
import { EpochsExhaustedError } from '../errors.js';
import type { Token } from '../state-machine/commands.js';

export const COUNTER_BITS = 40n;
export const COUNTER_MASK = (1n << COUNTER_BITS) - 1n;
/** Most nodes in a priority cluster: each owns one residue of the epoch. */
export const MAX_NODES = 16;
/** The largest epoch (24 bits); a peer announcing more is malformed. */
export const MAX_EPOCH = (1n << 24n) - 1n;

export function epochOf(token: Token): bigint {
  return token >> COUNTER_BITS;
}

export function firstTokenOf(epoch: bigint): Token {
  // Counter 0 is skipped so a token is never exactly epoch << 40 (never 0 either).
  return (epoch << COUNTER_BITS) | 1n;
}

/**
 * The epoch node number `index` (0-based priority) takes when it becomes
 * active, given the largest epoch it has seen (own tokens, replicated
 * tokens, peers' announcements). Throws when epochs are exhausted.
 */
export function nextEpoch(index: number, seen: bigint): bigint {
  const m = BigInt(MAX_NODES);
  const i = BigInt(index);
  let e = seen + 1n;
  e += (i - (e % m) + m) % m;
  if (e > MAX_EPOCH) throw new EpochsExhaustedError('fencing-token epochs exhausted (2^24 promotions); tokens cannot grow further');
  return e;
}

/** True when `next` is the last token of its epoch: the node must move to a new epoch first. */
export function epochFull(next: Token): boolean {
  return (next & COUNTER_MASK) === COUNTER_MASK;
}
