/**
 * Bounds on values from authenticated peers. A peer holds the peer token,
 * but that does not make what it sends true: a compromised node, a bug or a
 * corrupted stream must cost one link, never the node's state. Every value a
 * mode's peer protocol carries (tokens, epochs, terms, indexes, sizes) is
 * checked here before anything is applied or persisted; one out of range
 * throws PeerValueOutOfRange, and the mesh closes that link, logs the field
 * and counts it (ticketing_peer_values_out_of_range_total{field}).
 *
 * Where the modes call it: cluster/peer-protocol.ts (priority) and
 * raft/raft-wire.ts (Raft), in their decoders or in MeshHandler.message,
 * before the value reaches state.
 */
import { MAX_TOKEN } from '@ticketing/protocol';
import { PeerProtocolError } from '../errors.js';
import { clockToken } from '../cluster/hlc.js';
import type { Token } from '../state-machine/commands.js';

export class PeerValueOutOfRange extends PeerProtocolError {
  constructor(
    /** The message field, e.g. 'next-token' (a metric label: keep it a fixed word). */
    readonly field: string,
    message: string,
  ) {
    super(`${field} out of range: ${message}`);
  }
}

/**
 * How far ahead of this node's clock a peer's token may be. Tokens follow the
 * wall clock (priority: µs x 256, Raft: µs; the bound uses the larger), so a
 * correct peer's tokens are within the clock skew of ours; a day is far
 * beyond any skew a cluster allows and far below 2^64 (a heartbeat carrying
 * 2^64-2 was once inherited and persisted, and every acquire answered B).
 */
export const PEER_TOKEN_HORIZON_MS = 24 * 60 * 60 * 1000;

/** The largest token a correct peer can know of at wall time `wallMs` (this node's clock). */
export function peerTokenCeiling(wallMs: number): Token {
  const ceiling = clockToken(wallMs + PEER_TOKEN_HORIZON_MS);
  return ceiling < MAX_TOKEN ? ceiling : MAX_TOKEN;
}

/** Unsigned decimal without leading zeros (as on the client wire). */
const DECIMAL = /^(0|[1-9][0-9]*)$/;

/** A whole number `min..max` in decimal; anything else is out of range for `field`. */
export function boundedInt(text: string | undefined, field: string, min: number, max: number): number {
  if (text === undefined || !DECIMAL.test(text) || text.length > 16) throw new PeerValueOutOfRange(field, `not a number from ${min} to ${max}`);
  const n = Number(text);
  if (n < min || n > max) throw new PeerValueOutOfRange(field, `${n} is not from ${min} to ${max}`);
  return n;
}

/** A token `0..ceiling` (see peerTokenCeiling) in decimal. */
export function boundedToken(text: string | undefined, field: string, ceiling: Token): Token {
  if (text === undefined || !DECIMAL.test(text) || text.length > 20) throw new PeerValueOutOfRange(field, 'not a token');
  return checkBound(field, BigInt(text), ceiling);
}

/** `value` if it is at most `max`, else PeerValueOutOfRange. */
export function checkBound<T extends number | bigint>(field: string, value: T, max: T): T {
  if (value > max) throw new PeerValueOutOfRange(field, `${value} is above ${max}`);
  return value;
}
