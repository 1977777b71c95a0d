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
  epoch: bigint;
  following: string | undefined;
  appliedSeq: number;
}

export interface RoleFacts {
  readonly state: PeerRole;
  /** A graceful hand-off is under way: nothing changes until it ends. */
  readonly handingOff: boolean;
  readonly self: PeerInfo;
  /** Every other node, with whether it was heard from within the failover timeout and its last heartbeat. */
  readonly others: ReadonlyArray<{ readonly peer: PeerInfo; readonly reachable: boolean; readonly view: PeerView | undefined }>;
  /** This node's epoch while active. */
  readonly epoch: bigint;
  /** Highest epoch this node has seen anywhere. */
  readonly highestEpoch: bigint;
  /** The active node this standby follows. */
  readonly following: PeerInfo | undefined;
  /** Active only: has `peer` applied the whole stream? */
  readonly inSync: (peer: PeerInfo) => boolean;
  /** Starting only: has this node waited long enough to know no active is running? */
  readonly discoveryDone: () => boolean;
}

export type RoleDecision =
  | { readonly action: 'stay' }
  /** A higher-priority active has moved above our epoch: step back and follow it. */
  | { readonly action: 'demote'; readonly winner: PeerInfo }
  /** Stay active; maybe move to a new epoch first, maybe hand off to a returning higher-priority standby. */
  | { readonly action: 'lead'; readonly bumpEpoch: boolean; readonly handOffTo: PeerInfo | undefined }
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
    const higher = actives.find((p) => p.index < f.self.index);
    if (higher !== undefined) {
      // Step back once it has moved above our epoch (it does as soon as it hears ours, so its
      // tokens exceed everything we issued). An older 'active' heartbeat is either that moment
      // or the node that just handed over to us: wait, and do not raise our own epoch meanwhile.
      const view = f.others.find((o) => o.peer === higher)!.view!;
      return view.epoch > f.epoch ? { action: 'demote', winner: higher } : STAY;
    }
    // A new epoch is a command the standbys have not applied yet: no hand-off in the same turn.
    if (f.highestEpoch > f.epoch) return { action: 'lead', bumpEpoch: true, handOffTo: undefined };
    const successor = f.others
      .filter((o) => o.peer.index < f.self.index && o.reachable && o.view?.role === 'standby' && f.inSync(o.peer))
      .map((o) => o.peer)
      .sort(byPriority)[0];
    return { action: 'lead', bumpEpoch: false, handOffTo: successor };
  }
  if (actives.length > 0) return f.following === actives[0] ? STAY : { action: 'follow', active: actives[0]! };
  // No active node in sight: promote when no higher-priority node is alive to do it.
  if (f.others.some((o) => o.peer.index < f.self.index && o.reachable)) return STAY;
  if (f.state === 'starting' && !f.discoveryDone()) return STAY;
  return { action: 'promote' };
}
