/**
 * Fencing tokens of a priority cluster: a hybrid logical clock.
 *
 *   token = max(highest token seen + 1, wall-clock µs × 256), moved up to the
 *           next value whose remainder modulo 16 is this node's index in peers
 *
 * - Tokens grow across any restart or failover, with or without a data
 *   directory, as long as the nodes' clocks agree within the documented skew
 *   (docs/cluster.md): a node that starts after another one served reads a
 *   later time on its clock, so its first token is above the other's last.
 * - Every token a node hears of (replicated grants, snapshots, heartbeats,
 *   hand-offs) is inherited: the next grant goes above it, whatever the clock.
 * - Two nodes active at once (a partition) never issue the same token: their
 *   tokens differ modulo 16.
 * - 256 per µs leaves room for 16 grants per µs per node before tokens run
 *   ahead of the clock (the clock catches up when the load falls); a u64
 *   holds µs × 256 until the year 4200. Tokens of the old layout and of a
 *   single node (Unix µs) are all far below (µs < µs × 256).
 * - The wall clock is read in milliseconds (Clock.wallNow): the µs part is a
 *   count within the millisecond, which changes nothing above.
 *
 * Pure: the caller passes the wall time, so the simulator can drive it.
 */
import type { Token } from '../state-machine/commands.js';
import { clockFloor, clockReserveTokens } from '../storage/token-reservation.js';

/** Most nodes in a priority cluster: each owns one residue of the token. */
export const MAX_NODES = 16;
export { TOKENS_PER_MICRO } from '../storage/token-reservation.js';

/**
 * Tokens a data directory reserves ahead per write of its high-water mark: a
 * quarter of `failover-timeout` of clock. A node that restarts starts above
 * its mark, so its first tokens may run that far ahead of its clock, and a
 * successor that never saw them is above them only if its own clock is far
 * enough on (docs/cluster.md): the reservation spends part of the clock
 * budget, so it stays small. (Two seconds, as it was, let a node restarted
 * within them issue tokens its successor then undercut; whole-node
 * simulation, priority seeds 9 and 87.) The cost: about eight small fsyncs
 * per failover-timeout while grants flow, in the background.
 */
export const hlcReserveTokens = clockReserveTokens;

/** The smallest token the clock allows at wall time `wallMs` (Unix ms): every mode's floor. */
export const clockToken = clockFloor;

export { tokenWallMs } from '../storage/token-reservation.js';

/** The smallest token at or above `t` that belongs to node `index`. */
export function ownResidue(t: Token, index: number): Token {
  const m = BigInt(MAX_NODES);
  return t + ((BigInt(index) - (t % m) + m) % m);
}

/**
 * The token node `index` gives its next grant: above `next` (the table's
 * next token: one above everything issued, replicated or heard of) and not
 * below the clock, in the node's residue.
 */
export function nextToken(next: Token, wallMs: number, index: number): Token {
  const clock = clockToken(wallMs);
  return ownResidue(next > clock ? next : clock, index);
}
