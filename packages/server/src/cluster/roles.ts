/**
 * The priority cluster's role rule (seed 000), as a pure function of what
 * this node knows: among live nodes the highest-priority one is active.
 * No timers, no sends: priority-mode.ts gathers the facts, calls this on
 * every heartbeat it hears and every tick, and carries out the decision.
 */
import type { PeerInfo } from '../peers/members.js';
import type { PeerRole } from './peer-protocol.js';

/** What a peer last said about itself (its heartbeat). */
export interface PeerView {
  role: PeerRole;
  following: string | undefined;
  appliedSeq: number;
  /** Its heartbeat says it heard us within the failover timeout. */
  hearsUs: boolean;
}

export interface RoleFacts {
  readonly state: PeerRole;
  /** A graceful hand-off is under way: nothing changes until it ends. */
  readonly handingOff: boolean;
  readonly self: PeerInfo;
  /**
   * Every other node: whether it was heard from within the failover timeout,
   * its last heartbeat, and for how long (ms) it has been active while saying
   * it does not hear us (0: it hears us, or is not active).
   */
  readonly others: ReadonlyArray<{ readonly peer: PeerInfo; readonly reachable: boolean; readonly view: PeerView | undefined; readonly deafMs: number }>;
  readonly failoverTimeoutMs: number;
  /** The active node this standby follows. */
  readonly following: PeerInfo | undefined;
  /** Active only: has `peer` applied the whole stream? */
  readonly inSync: (peer: PeerInfo) => boolean;
  /** Starting only: has this node waited long enough to know no active is running? */
  readonly discoveryDone: () => boolean;
  /** Some peer was started with another peers list or mode: never promote until that is fixed. */
  readonly misconfigured: boolean;
}

export type RoleDecision =
  | { readonly action: 'stay' }
  /** Another active wins: step back and follow it. */
  | { readonly action: 'demote'; readonly winner: PeerInfo; readonly why: string }
  /** Stay active; maybe hand off to a returning higher-priority standby. */
  | { readonly action: 'lead'; readonly handOffTo: PeerInfo | undefined }
  | { readonly action: 'follow'; readonly active: PeerInfo }
  | { readonly action: 'promote' };

const STAY: RoleDecision = { action: 'stay' };

export function decideRole(f: RoleFacts): RoleDecision {
  if (f.state === 'stopping' || f.handingOff) return STAY;
  const byPriority = (a: PeerInfo, b: PeerInfo) => a.index - b.index;
  const actives = f.others
    .filter((o) => o.reachable && o.view?.role === 'active')
    .map((o) => o.peer)
    .sort(byPriority);
  if (f.state === 'active') {
    // Two actives: the higher-priority one wins, whatever their tokens (hearing it is enough; waiting
    // for it to hear us would last as long as a one-way partition does).
    const higher = actives.find((p) => p.index < f.self.index);
    if (higher !== undefined) return { action: 'demote', winner: higher, why: 'it has higher priority' };
    // A lower-priority active that has not heard us for a failover timeout will never step back
    // (a one-way partition): we hear it, so we step back to it and the cluster has one active again.
    const deaf = f.others.find((o) => o.reachable && o.view?.role === 'active' && o.deafMs >= f.failoverTimeoutMs);
    if (deaf !== undefined) return { action: 'demote', winner: deaf.peer, why: 'it cannot hear this node (one-way partition)' };
    const successor = f.others
      .filter((o) => o.peer.index < f.self.index && o.reachable && o.view?.role === 'standby' && f.inSync(o.peer))
      .map((o) => o.peer)
      .sort(byPriority)[0];
    return { action: 'lead', handOffTo: successor };
  }
  if (actives.length > 0) return f.following === actives[0] ? STAY : { action: 'follow', active: actives[0]! };
  // No active node in sight: promote when no higher-priority node is alive to do it.
  if (f.others.some((o) => o.peer.index < f.self.index && o.reachable)) return STAY;
  if (f.state === 'starting' && !f.discoveryDone()) return STAY;
  if (f.misconfigured) return STAY;
  return { action: 'promote' };
}
