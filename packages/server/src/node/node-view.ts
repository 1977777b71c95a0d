/**
 * What the edges (admin HTTP, status command) may see of a node: read-only
 * status, engine statistics and observation hooks. Cluster modes fill in
 * roles and peers.
 */
import type { ErrorCode } from '@ticketing/protocol';
import type { LeasedRecord, LockEngine } from '../engine/lock-engine.js';
import type { Clock } from '../seams/clock.js';
import type { Token } from '../state-machine/commands.js';
import type { LockTable } from '../state-machine/lock-table.js';
import type { Backup } from '../storage/backup.js';

export type NodeRole = 'single' | 'active' | 'standby' | 'leader' | 'follower' | 'candidate' | 'stopping';

export interface PeerStatus {
  readonly name: string;
  /** Client address (what M replies carry). */
  readonly address: string;
  /** As this node last saw it. */
  readonly role: NodeRole | 'unknown';
  readonly reachable: boolean;
  /** Commands the peer is behind this node (cluster modes), when known. */
  readonly lag?: number;
  /** Age of the oldest command the peer has not confirmed, in milliseconds. */
  readonly lagMs?: number;
  /**
   * Priority mode: reachable (heard within the failover timeout), gone
   * (silent that long, or its peer port refused us), unknown (not heard
   * yet), or refusing (its process answered our dial and refused the link).
   */
  readonly link?: 'reachable' | 'gone' | 'unknown' | 'refusing';
  /** Priority mode: why the peer refuses our link (another configuration or peer token). */
  readonly refusing?: string;
  /** Priority mode: the peer's wall clock minus ours (ms, NTP-style over heartbeats), and the estimate's error. */
  readonly clockOffsetMs?: number;
  readonly clockErrorMs?: number;
  /** Priority mode: the offset is certainly beyond the bound the fencing tokens allow. */
  readonly clockBeyondBound?: boolean;
  /**
   * The peer protocol version each link with the peer runs at, while it is
   * up: `outbound` ours to it (what this node sends), `inbound` its to us.
   * Below this release's newest during a rolling upgrade (docs/versioning.md).
   */
  readonly peerProtocol?: { readonly outbound?: number; readonly inbound?: number };
}

/** A priority-mode node's role protocol, as /status shows it. */
export interface PriorityStatus {
  /** starting, standby, candidate (its active is gone, it decides), active or stopping. */
  readonly role: string;
  /** The epoch it serves in, or of the stream it follows. */
  readonly epoch: string | undefined;
  /** Why it does not take over now, when that is the question. */
  readonly notPromotingBecause?: string;
  /** Clocks may differ by this much (ms): half the failover timeout. */
  readonly clockBoundMs: number;
}

/** A priority-mode active's replication, as /status shows it. */
export interface ReplicationStatus {
  /** Standbys that acknowledged within the failover timeout. */
  readonly standbysAcking: number;
  /** Standbys each reply waits for (sync-standbys). */
  readonly syncStandbys: number;
  /** No standby acknowledges: a failure of this node loses everything granted since (it keeps serving: no quorum by design). */
  readonly alone: boolean;
  /** Fewer than syncStandbys standbys acknowledge: replies wait (/readyz says not ready). */
  readonly stalled: boolean;
  /**
   * A standby has confirmed this node's table since it became active (or it
   * took over a replicated one): a peer refusing its link no longer makes it
   * step back (docs/cluster.md).
   */
  readonly tableConfirmed: boolean;
}

export interface RaftStatus {
  readonly term: number;
  readonly leader: string | undefined;
  readonly commit: number;
  readonly applied: number;
  readonly lastIndex: number;
  readonly snapshot: number;
  /** The membership this node holds (the latest in its log), this node included. */
  readonly members: readonly { readonly name: string; readonly address: string; readonly voter: boolean }[];
  /** The log index of that membership (0: the log holds none yet; --peers describes the cluster). */
  readonly membershipIndex: number;
  /**
   * Since the start: synced WAL writes and the entries they carried (group
   * commit: entries per write), appends sent to followers and the entries
   * they carried (entries per message).
   */
  readonly io: { readonly walWrites: number; readonly walEntries: number; readonly appendsSent: number; readonly appendEntriesSent: number };
}

/** One member of a Raft cluster, as the membership API shows it. */
export interface MemberStatus {
  readonly name: string;
  /** Client address (HOST:PORT). */
  readonly address: string;
  /** Voters elect and count toward a majority; learners receive the log to catch up. */
  readonly voter: boolean;
  readonly leader: boolean;
  /** The node answering. */
  readonly self: boolean;
  /** Heard from within the failover timeout (the leader's view). */
  readonly reachable: boolean;
  /** Entries behind the leader's log (the leader answers). */
  readonly lag?: number;
}

export interface MembershipView {
  readonly members: readonly MemberStatus[];
  /** The log index of this membership (0: none held yet). */
  readonly index: number;
  /** Whether that index has committed (a change under way has not). */
  readonly committed: boolean;
  readonly term: number;
  readonly leader: string | undefined;
}

export type MembershipRequest =
  | { readonly op: 'add'; readonly name: string; readonly address: string }
  | { readonly op: 'promote'; readonly name: string }
  | { readonly op: 'remove'; readonly name: string }
  | { readonly op: 'update'; readonly name: string; readonly address: string };

/** Raft membership changes and leadership transfer (the admin API's `/members`). */
export interface MembershipControl {
  view(): MembershipView;
  /** Makes the change through the log; resolves once it has committed (MembershipRefused otherwise). */
  change(request: MembershipRequest, timeoutMs: number): Promise<MembershipView>;
  /** Hands leadership over (default: to the most caught-up voter); resolves with the new leader's name. */
  transfer(to: string | undefined, timeoutMs: number): Promise<string>;
}

/**
 * A Raft node's log as it is in memory now, for the simulator's safety
 * checks (log matching, leader completeness): not part of /status.
 */
export interface RaftLogView {
  readonly status: RaftStatus;
  /** The term this node serves clients in as leader (undefined: it does not serve). */
  readonly servingTerm: number | undefined;
  /** The consensus core's role now ('leader' only while it leads status.term). */
  readonly coreRole: string;
  /** Term of the entry at `index`; undefined when compacted away or beyond the log. */
  termAt(index: number): number | undefined;
  /** The encoded command at `index` ('' for a no-op); undefined when not in memory. */
  commandAt(index: number): string | undefined;
  /** The last index the node counts as on its disk: what it acknowledges, and as leader counts toward commit. */
  readonly durableIndex: number;
}

export interface NodeStatus {
  readonly version: string;
  /** The cluster-name setting: which cluster this node belongs to (monitoring groups by it). */
  readonly cluster: string;
  readonly node: string;
  readonly mode: 'single' | 'priority' | 'raft';
  readonly role: NodeRole;
  readonly listen: string;
  /** The client address of the node that serves clients now, when known. */
  readonly active: string | undefined;
  readonly startedAt: string;
  readonly uptimeMs: number;
  readonly locks: { readonly held: number; readonly waiting: number };
  readonly connections: number;
  readonly tokens: { readonly next: string; readonly highWater: string | undefined };
  readonly peers: readonly PeerStatus[];
  /** Raft mode: this node's view of the log. */
  readonly raft?: RaftStatus;
  /** Priority mode, active node: who acknowledges its replication. */
  readonly replication?: ReplicationStatus;
  /** Priority mode: the role protocol's view. */
  readonly priority?: PriorityStatus;
  /** Settings worth showing; never secrets (tokens are shown as counts). */
  readonly config: Readonly<Record<string, string | number | boolean>>;
}

/** Things worth an alert that happen rarely; counted for `/metrics`. */
export interface NodeEvents {
  /** The wall clock (µs) was behind the tokens already issued when it served as a token floor. */
  clockFloorWarnings: number;
  /** Writes to the data directory that failed (token reservation, Raft WAL or snapshot). */
  diskErrors: number;
  /** Peer links closed because a message did not decode or could not be handled. */
  badPeerMessages: number;
  /** Peer links refused in the handshake, either side (TLS, cluster identity, name, proof, certificate). */
  peerAuthFailures: number;
  /** Faults of the server's own code it contained (an `E internal`, a peer message its handler could not take). */
  internalErrors: number;
  /** Peer links closed for a value out of range, by message field (peers/peer-bounds.ts). */
  peerValuesOutOfRange: Record<string, number>;
  /** Unauthenticated peer connections closed to make room, or past their handshake deadline. */
  peerConnectionsShed: number;
  /** Client connections whose H carried a wrong token, or none where one is required. */
  clientAuthFailures: number;
}

/** Counts per client identity (see session/identities.ts). */
export interface IdentityCountsView {
  readonly connections: number;
  readonly acquires: number;
  readonly releases: number;
  readonly denied: number;
  readonly notReleased: number;
}

/**
 * What became of an operator's release: `released` (replicated as a
 * client's release is before its reply), `not-held` (not held under that
 * token), `not-serving` (this node does not serve clients: ask the active
 * one), `unknown` (this node stopped leading before the release committed:
 * it may or may not have taken effect).
 */
export type ForceReleaseResult = 'released' | 'not-held' | 'not-serving' | 'unknown';

export interface NodeView {
  readonly engine: LockEngine;
  /** The node's clock (lease deadlines are on its monotonic time; the admin listener's history samples on it). */
  readonly clock: Clock;
  /** This node's lock table: what it serves, or its replicated copy; undefined when it has none yet. */
  lockTable(): LockTable<LeasedRecord> | undefined;
  /** An operator's release of exactly the grant of `key` holding `token`, whoever acquired it. */
  forceRelease(key: string, token: Token): Promise<ForceReleaseResult>;
  /** Per client identity ('-': bare tokens and connections without one). */
  readonly identities: { readonly counts: ReadonlyMap<string, IdentityCountsView> };
  readonly events: NodeEvents;
  status(): NodeStatus;
  /** Called with the code of every `E` the node sends (for metrics). */
  onSessionError: (code: ErrorCode) => void;
  /** Raft mode: membership changes and leadership transfer (undefined in other modes). */
  membership?(): MembershipControl | undefined;
  /** A backup of the table this node serves; undefined when it does not serve (`GET /snapshot`). */
  backup?(): Backup | undefined;
}
