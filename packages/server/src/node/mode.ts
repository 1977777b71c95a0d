/**
 * The contract between a node and its mode (single, priority cluster, Raft):
 * the mode decides whether and when the node serves clients, the node does
 * the rest. Kept apart from both so that neither imports the other.
 */
import type { Logger } from 'pino';
import type { ServerConfig } from '../config/load.js';
import type { Clock } from '../seams/clock.js';
import type { Environment } from '../seams/environment.js';
import type { LeasedLog, LeasedRecord, LockEngine, TokenGuard } from '../engine/lock-engine.js';
import type { LockTable } from '../state-machine/lock-table.js';
import type { Token } from '../state-machine/commands.js';
import type { PeerProtocol } from '../peers/handshake.js';
import type { MembershipControl, NodeEvents, NodeRole, NodeStatus, PeerStatus, PriorityStatus, RaftLogView, RaftStatus, ReplicationStatus } from './node-view.js';

/** What decides when this node serves: single node, priority cluster, Raft. */
export interface NodeMode {
  readonly name: NodeStatus['mode'];
  readonly role: NodeRole;
  /** Starts the mode (peer links, first role). */
  start(): Promise<void>;
  /** Stops it; an active cluster node hands off to a successor first. */
  stop(): Promise<void>;
  /** Undefined while serving; otherwise the address for `M` ('-' when unknown). */
  redirectTarget(): string | undefined;
  /** Client address of the node that serves now, when known. */
  activeAddress(): string | undefined;
  /** Locks held in this node's table (a standby's replicated copy included). */
  heldCount(): number;
  /** This node's lock table: what it serves, or its replicated copy; undefined when it has none yet. */
  lockTable(): LockTable<LeasedRecord> | undefined;
  peers(): PeerStatus[];
  /** Writes replication of what was applied so far to the standbys now: a reply never leaves before it (priority mode). */
  flushReplication?(): void;
  /** Priority mode, active: who acknowledges its replication. */
  replicationStatus?(): ReplicationStatus | undefined;
  /** Priority mode: the role protocol's view. */
  priorityStatus?(): PriorityStatus;
  /** Raft mode: term, leader and log positions. */
  raftStatus?(): RaftStatus;
  /** Raft mode: the log in memory, for the simulator's checks. */
  raftLog?(): RaftLogView;
  /** New certificates for peer links (SIGHUP), read from the host's (already reloaded) configuration; true when applied. */
  updateTls?(): boolean;
  /** Raft mode: membership changes and leadership transfer. */
  readonly membership?: MembershipControl;
}

/** A Raft leader's log positions: replies wait until the index they depend on commits. */
export interface ReplyGate {
  lastIndex(): number;
  commitIndex(): number;
  /** Held grants are answered T this long past their wait at least (see Session.holdDeadline); undefined: never. */
  readonly holdLimitMs?: number;
}

/** What a mode may do with its node. */
export interface ModeHost {
  readonly config: ServerConfig;
  /** The client address this node listens on (the real port when 0 was asked). */
  readonly listenAddress: string;
  readonly logger: Logger;
  readonly clock: Clock;
  /** The node's clock, transport, disk and randomness (the mode's peer links and storage use them). */
  readonly env: Environment;
  readonly engine: LockEngine;
  /** Counters for alerts (clock behind the tokens, disk errors). */
  readonly events: NodeEvents;
  /** The first token this node may issue: above all it issued before (data directory) or the Unix time in µs. */
  readonly tokenFloor: Token;
  /**
   * The mark the data directory recorded before this start (0n: none, or
   * --memory): tokens issued or heard of here before, without this start's
   * clock, which is no token anyone issued. What a priority node tells its
   * peers it knows of (a standby with a fast clock told the active its clock,
   * the active's tokens ran ahead, and a correct node that took over without
   * having heard them undercut them; whole-node simulation, priority seed 406).
   */
  readonly recordedTokenMark: Token;
  /** The peer protocol versions this node speaks, newest first (its peer mesh's; see NodeDeps.peerProtocols). */
  readonly peerProtocols: readonly PeerProtocol[];
  /** Start serving clients over `log`. */
  serve(log: LeasedLog, guard: TokenGuard): void;
  /** Stop serving: waiting acquires get `T`, every connection `M <redirect>`. */
  stand(redirect: string): void;
  /** Stop or resume reading client requests (a hand-off is under way). */
  pauseClients(): void;
  resumeClients(): void;
  /** Keeps the token high-water mark at or above `next` (false: cannot; never issue it). */
  reserveTokens(next: Token): boolean;
  /** Holds replies until their log index commits (Raft leader), or stops holding (undefined). */
  setReplyGate(gate: ReplyGate | undefined): void;
  /** The commit index moved: release the replies that waited for it. */
  commitAdvanced(): void;
  /** The mode cannot go on safely (e.g. its storage failed): stop the node. */
  fatal(err: Error): void;
  /**
   * A fault of the server's own code (an assertion, an exception where none
   * was expected), contained where it happened: reported, counted, and a
   * safety assertion (or `fatal`: the mode cannot go on) stops the node.
   */
  internalError(err: Error, where: string, fatal?: boolean): void;
}
