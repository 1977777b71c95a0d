/**
 * One Ticketing node: the client listener, its sessions, the lock engine,
 * storage, and the node's lifecycle. Whether and when this node serves
 * clients is decided by its mode (single, priority cluster, Raft): the mode
 * calls `serve` and `stand`, the node does the rest.
 */
import type { ErrorCode } from '@ticketing/protocol';
import type { Logger } from 'pino';
import { systemClock, type Clock } from '../engine/clock.js';
import { LockEngine, type CommandLog, type TokenGuard } from '../engine/lock-engine.js';
import { ClientListener } from '../net/client-listener.js';
import { joinHostPort, splitHostPort } from '../net/address.js';
import { ClientTokens } from '../session/client-tokens.js';
import type { Session, SessionContext } from '../session/session.js';
import { DataDirLock } from '../storage/data-dir-lock.js';
import { TokenReservation, unixMicros } from '../storage/token-reservation.js';
import type { Token } from '../state-machine/commands.js';
import type { ServerConfig } from '../config/load.js';
import { loadTls, type TlsMaterial } from '../net/tls-config.js';
import { VERSION } from '../version.js';
import type { NodeEvents, NodeRole, NodeStatus, NodeView, PeerStatus, RaftStatus } from './node-view.js';
import { SingleMode } from './single-mode.js';
import { PriorityMode } from '../cluster/priority-mode.js';
import { RaftMode } from '../raft/raft-mode.js';

/** Longest a graceful shutdown waits for clients to read their last replies. */
const SHUTDOWN_GRACE_MS = 5_000;

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
  peers(): PeerStatus[];
  /** Raft mode: term, leader and log positions. */
  raftStatus?(): RaftStatus;
  /** New certificates for peer links (SIGHUP). */
  updateTls?(tls: TlsMaterial): void;
}

/** A Raft leader's log positions: replies wait until the index they depend on commits. */
export interface ReplyGate {
  lastIndex(): number;
  commitIndex(): number;
}

/** What a mode may do with its node. */
export interface ModeHost {
  readonly config: ServerConfig;
  /** The client address this node listens on (the real port when 0 was asked). */
  readonly listenAddress: string;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly engine: LockEngine;
  /** Counters for alerts (clock behind the tokens, disk errors). */
  readonly events: NodeEvents;
  /** The first token this node may issue: above all it issued before (data directory) or the Unix time in µs. */
  readonly tokenFloor: Token;
  /** Start serving clients over `log`. */
  serve(log: CommandLog, guard: TokenGuard): void;
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
}

export class TicketingNode implements SessionContext, NodeView, ModeHost {
  readonly engine: LockEngine;
  readonly nodeName: string;
  readonly clock: Clock = systemClock;
  readonly tokenFloor: Token;
  readonly events: NodeEvents = { clockFloorWarnings: 0, diskErrors: 0 };
  onSessionError: (code: ErrorCode) => void = () => {};
  private readonly mode: NodeMode;
  private readonly listener: ClientListener;
  private readonly clientTokens: ClientTokens;
  private stopping: Promise<void> | undefined;
  private held = false;
  private listenedOn: string | undefined;
  private replyGate: ReplyGate | undefined;
  private readonly waitingForCommit = new Set<Session>();
  private readonly startedAt = new Date();

  private constructor(
    public config: ServerConfig,
    readonly logger: Logger,
    private readonly reservation: TokenReservation | undefined,
    private readonly dirLock: DataDirLock | undefined,
    firstToken: Token,
    private readonly onExit: (code: number) => void,
  ) {
    this.nodeName = config.node;
    this.tokenFloor = firstToken;
    this.clientTokens = new ClientTokens(config['client-tokens']);
    this.engine = new LockEngine(this.clock, limitsOf(config));
    this.listener = new ClientListener(this, {
      maxConns: () => this.config['max-conns'],
      idleTimeoutMs: () => this.config['idle-timeout'],
      lineTimeoutMs: () => this.config['line-timeout'],
      tls: loadTls(config),
      onTlsError: (err, remote) => logger.debug({ remote, err: err.message }, 'client TLS handshake failed'),
    });
    if (config.mode === 'raft') this.mode = new RaftMode(this);
    else this.mode = config.peers.length > 0 ? new PriorityMode(this) : new SingleMode(this);
  }

  /** Starts a node and its listener; `onExit` is called when the node has stopped, with the exit code. */
  static async start(config: ServerConfig, logger: Logger, onExit: (code: number) => void): Promise<TicketingNode> {
    const dirLock = config.memory ? undefined : DataDirLock.acquire(config['data-dir']);
    let node: TicketingNode | undefined;
    try {
      const clockFloor = unixMicros();
      let firstToken = clockFloor;
      let reservation: TokenReservation | undefined;
      if (!config.memory) {
        ({ reservation, firstToken } = TokenReservation.open(config['data-dir'], config['token-reserve'], firstToken));
      }
      node = new TicketingNode(config, logger, reservation, dirLock, firstToken, onExit);
      const started = node;
      // The recorded high-water mark runs at most two reservation blocks ahead of
      // the tokens issued; further ahead of the clock means the clock stepped back.
      const ahead = firstToken - clockFloor;
      if (ahead > 2n * BigInt(config['token-reserve'])) {
        node.events.clockFloorWarnings++;
        logger.warn({ behindMicros: ahead.toString() }, 'the clock is behind the tokens this data directory issued: did it step back? (tokens stay increasing)');
      }
      if (reservation !== undefined) reservation.onFailure = (err) => started.fatal(new Error(`cannot reserve fencing tokens: ${err.message}`));
      const { host, port } = splitHostPort(config.listen);
      await node.listener.listen(host, port);
      void node.listenAddress; // remember it while the listener can tell
      await node.mode.start();
      logger.info({ node: node.nodeName, mode: node.mode.name, listen: node.listenAddress, memory: config.memory }, 'started');
      return node;
    } catch (err) {
      await node?.listener.close().catch(() => {});
      dirLock?.release();
      throw err;
    }
  }

  get role(): NodeRole {
    return this.stopping === undefined ? this.mode.role : 'stopping';
  }

  /** The client address this node listens on (kept: the listener forgets it once closed). */
  get listenAddress(): string {
    if (this.listenedOn === undefined) {
      const a = this.listener.address;
      this.listenedOn = joinHostPort(a.address, a.port);
    }
    return this.listenedOn;
  }

  get sessionCount(): number {
    return this.listener.sessions.size;
  }

  status(): NodeStatus {
    const c = this.config;
    return {
      version: VERSION,
      node: this.nodeName,
      mode: this.mode.name,
      role: this.role,
      listen: this.listenAddress,
      active: this.mode.activeAddress(),
      startedAt: this.startedAt.toISOString(),
      uptimeMs: Date.now() - this.startedAt.getTime(),
      locks: { held: this.mode.heldCount(), waiting: this.engine.waitingCount },
      connections: this.sessionCount,
      tokens: { next: this.engine.nextToken?.toString() ?? '-', highWater: this.reservation?.highWater.toString() },
      peers: this.mode.peers(),
      ...(this.mode.raftStatus === undefined ? {} : { raft: this.mode.raftStatus() }),
      config: {
        'data-dir': c.memory ? '(memory)' : c['data-dir'],
        'client-tokens': this.clientTokens.count,
        'max-locks': c['max-locks'],
        'max-waiters-per-key': c['max-waiters-per-key'],
        'max-waiters': c['max-waiters'],
        'max-pending-per-conn': c['max-pending-per-conn'],
        'max-conns': c['max-conns'],
        'log-level': c['log-level'],
      },
    };
  }

  // --- ModeHost ---

  serve(log: CommandLog, guard: TokenGuard): void {
    this.engine.serve(log, guard);
    this.resumeClients();
  }

  stand(redirect: string): void {
    this.engine.stop();
    this.held = false;
    for (const session of [...this.listener.sessions]) session.redirect(redirect);
  }

  setReplyGate(gate: ReplyGate | undefined): void {
    if (gate === undefined) {
      // Stepping down: committed replies go out, the rest are dropped.
      for (const session of this.waitingForCommit) session.dropUncommitted();
      this.waitingForCommit.clear();
    }
    this.replyGate = gate;
  }

  commitAdvanced(): void {
    for (const session of [...this.waitingForCommit]) {
      session.releaseCommitted();
      if (!session.hasHeldReplies) this.waitingForCommit.delete(session);
    }
  }

  pauseClients(): void {
    this.held = true;
    for (const session of this.listener.sessions) session.pauseReading();
  }

  resumeClients(): void {
    this.held = false;
    for (const session of this.listener.sessions) session.resumeReading();
  }

  clientsHeld(): boolean {
    return this.held;
  }

  reserveTokens(next: Token): boolean {
    return this.reservation?.admit(next) ?? true;
  }

  // --- SessionContext ---

  gateIndex(): number | undefined {
    return this.replyGate?.lastIndex();
  }

  committedIndex(): number {
    return this.replyGate?.commitIndex() ?? Number.MAX_SAFE_INTEGER;
  }

  awaitCommit(session: Session): void {
    this.waitingForCommit.add(session);
  }

  get maxPendingPerConn(): number {
    return this.config['max-pending-per-conn'];
  }

  get tokensRequired(): boolean {
    return this.clientTokens.required;
  }

  checkClientToken(token: string): boolean {
    return this.clientTokens.check(token);
  }

  redirectTarget(): string | undefined {
    return this.stopping === undefined ? this.mode.redirectTarget() : undefined;
  }

  sessionClosed(session: Session): void {
    this.listener.forget(session);
    this.waitingForCommit.delete(session);
  }

  sessionFailed(session: Session, code: ErrorCode, text: string): void {
    if (code === 'internal') this.logger.error({ remote: session.remote, text }, 'internal error while serving a connection');
    else this.logger.debug({ remote: session.remote, code, text }, 'closed a connection with an error');
    this.onSessionError(code);
  }

  // --- lifecycle ---

  /** Applies settings that can change without a restart (SIGHUP): client tokens and limits. */
  reload(config: ServerConfig): void {
    const tls = loadTls(config);
    if ((tls === undefined) !== (this.config['tls-cert'] === undefined)) {
      throw new Error('turning TLS on or off needs a restart; certificates and keys can be reloaded');
    }
    this.config = config;
    this.clientTokens.replace(config['client-tokens']);
    this.engine.limits = limitsOf(config);
    if (tls !== undefined) {
      this.listener.updateTls(tls);
      this.mode.updateTls?.(tls);
    }
    this.logger.info({ clientTokens: this.clientTokens.count, tlsReloaded: tls !== undefined }, 'configuration reloaded');
  }

  /**
   * Graceful shutdown: stop accepting, let the mode hand off (cluster), answer
   * every waiting acquire `T`, write `E unavailable <reason>` to each remaining
   * connection, close, exit.
   */
  async shutdown(reason = 'shutting down', exitCode = 0): Promise<void> {
    this.stopping ??= this.stop(reason, exitCode);
    return this.stopping;
  }

  private async stop(reason: string, exitCode: number): Promise<void> {
    this.logger.info({ reason }, 'stopping');
    const closed = this.listener.close();
    if (exitCode === 0) await this.mode.stop();
    this.engine.stop();
    for (const session of [...this.listener.sessions]) session.fail('unavailable', reason);
    if (exitCode !== 0) await this.mode.stop().catch(() => {});
    await Promise.race([closed, new Promise((r) => setTimeout(r, SHUTDOWN_GRACE_MS).unref())]);
    this.dirLock?.release();
    this.logger.info({ exitCode }, 'stopped');
    this.onExit(exitCode);
  }

  /** The node cannot go on safely (token reservation or storage failed: a disk error): stop serving at once. */
  fatal(err: Error): void {
    this.events.diskErrors++;
    this.logger.error({ err: err.message, dataDir: this.config['data-dir'] }, 'stopping: this node cannot go on safely');
    void this.shutdown(err.message, 1);
  }
}

function limitsOf(config: ServerConfig) {
  return {
    maxLocks: config['max-locks'],
    maxWaitersPerKey: config['max-waiters-per-key'],
    maxWaiters: config['max-waiters'],
  };
}
