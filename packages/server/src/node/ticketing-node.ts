/**
 * One Ticketing node: the client listener, its sessions, the lock engine,
 * storage, and the node's lifecycle. Whether and when this node serves
 * clients is decided by its mode (single, priority cluster, Raft): the mode
 * calls `serve` and `stand`, the node does the rest.
 */
import type { ErrorCode } from '@ticketing/protocol';
import type { Logger } from 'pino';
import type { Clock, TimerHandle } from '../seams/clock.js';
import type { Environment } from '../seams/environment.js';
import { realEnvironment } from '../seams/real-environment.js';
import { LockEngine, type LeasedLog, type TokenGuard } from '../engine/lock-engine.js';
import { ClientListener } from '../net/client-listener.js';
import { AuthThrottle } from '../net/auth-throttle.js';
import { joinHostPort, splitHostPort } from '../net/address.js';
import { ClientIdentities, type ClientIdentity } from '../session/identities.js';
import type { Session, SessionContext } from '../session/session.js';
import { DataDirLock } from '../storage/data-dir-lock.js';
import { checkDataDirFormat } from '../storage/data-dir-format.js';
import type { Backup } from '../storage/backup.js';
import { clockFloor, clockReserveTokens, TokenReservation, tokenWallMs, type RecordedMark, type TokenMode } from '../storage/token-reservation.js';
import type { Token } from '../state-machine/commands.js';
import type { ServerConfig } from '../config/load.js';
import { loadTls } from '../net/tls-config.js';
import { peerLinkKind } from '../peers/peer-tls.js';
import { PEER_PROTOCOLS, peerProtocols, type PeerProtocol } from '../peers/handshake.js';
import { VERSION } from '../version.js';
import { RestartRequiredError, SafetyViolation, StorageError } from '../errors.js';
import type { ForceReleaseResult, MembershipControl, NodeEvents, NodeRole, NodeStatus, NodeView, RaftLogView } from './node-view.js';
import type { LeasedRecord } from '../engine/lock-engine.js';
import type { LockTable } from '../state-machine/lock-table.js';
import { createMode } from './mode-factory.js';
import { planReload } from './reload-plan.js';
import type { ModeHost, NodeMode, ReplyGate } from './mode.js';

/** What a node is started with; the parts of its environment not given are the real ones. */
export interface NodeDeps extends Partial<Environment> {
  readonly logger: Logger;
  /** Called once the node has stopped, with its exit code (the CLI exits the process). */
  readonly onExit?: (code: number) => void;
  /**
   * Told of every fault of the node's own code it contained (see
   * internalError): a simulation or a test fails on it, where a real node
   * logs it and goes on (or, for a safety assertion, stops).
   */
  readonly onInternalError?: (err: Error, where: string) => void;
  /**
   * The peer protocol versions this node speaks (default: every one this
   * release knows, PEER_PROTOCOLS). Not a setting: a test or the simulator
   * narrows it to stand a node in for an older release (2 only: 0.1.0).
   */
  readonly peerProtocols?: readonly number[];
}

/** Longest a graceful shutdown waits for clients to read their last replies. */
const SHUTDOWN_GRACE_MS = 5_000;
/** How often held grants are checked against their hold deadline (T replies are prompt within this). */
const HELD_GRANT_SWEEP_MS = 50;

export class TicketingNode implements SessionContext, NodeView, ModeHost {
  readonly engine: LockEngine;
  readonly nodeName: string;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly tokenFloor: Token;
  readonly recordedTokenMark: Token;
  readonly peerProtocols: readonly PeerProtocol[];
  readonly events: NodeEvents = {
    clockFloorWarnings: 0,
    diskErrors: 0,
    badPeerMessages: 0,
    peerAuthFailures: 0,
    peerValuesOutOfRange: {},
    peerConnectionsShed: 0,
    clientAuthFailures: 0,
    internalErrors: 0,
  };
  onSessionError: (code: ErrorCode) => void = () => {};
  private readonly mode: NodeMode;
  private readonly onExit: (code: number) => void;
  private readonly onInternalError: (err: Error, where: string) => void;
  private readonly listener: ClientListener;
  /** The client tokens accepted in `H` and who each one is (none: no `H` needed). */
  readonly identities: ClientIdentities;
  /** Failed `H` per source address: throttled and logged (net/auth-throttle.ts). */
  private readonly authThrottle: AuthThrottle;
  private stopping: Promise<void> | undefined;
  private held = false;
  private listenedOn: string | undefined;
  private replyGate: ReplyGate | undefined;
  private readonly waitingForCommit = new Set<Session>();
  private sweep: TimerHandle | undefined;
  /** Operators' releases waiting for the log index they depend on (see forceRelease). */
  private releasesWaiting: Array<{ readonly index: number; readonly resolve: (r: ForceReleaseResult) => void }> = [];
  /** Wall time (Unix ms) the node started. */
  private readonly startedAt: number;

  private constructor(
    public config: ServerConfig,
    readonly env: Environment,
    deps: NodeDeps,
    private readonly reservation: TokenReservation | undefined,
    private readonly dirLock: DataDirLock | undefined,
    firstToken: Token,
    recordedTokenMark: Token,
  ) {
    const logger = deps.logger;
    this.logger = logger;
    this.onExit = deps.onExit ?? (() => {});
    this.onInternalError = deps.onInternalError ?? (() => {});
    this.clock = env.clock;
    this.startedAt = env.clock.wallNow();
    this.nodeName = config.node;
    this.tokenFloor = firstToken;
    this.recordedTokenMark = recordedTokenMark;
    this.peerProtocols = peerProtocols(deps.peerProtocols ?? PEER_PROTOCOLS);
    this.identities = new ClientIdentities(config.clientIdentities);
    this.authThrottle = new AuthThrottle(env.clock, logger, () => this.events.clientAuthFailures++);
    this.engine = new LockEngine(this.clock, limitsOf(config), env.probes);
    this.listener = new ClientListener(this, env.transport, env.clock, {
      maxConns: () => this.config['max-conns'],
      maxConnsPerAddress: () => this.config['max-conns-per-address'],
      helloTimeoutMs: () => this.config['hello-timeout'],
      logger,
      idleTimeoutMs: () => this.config['idle-timeout'],
      lineTimeoutMs: () => this.config['line-timeout'],
      tls: loadTls(config),
      onTlsError: (err, remote) => logger.debug({ remote, err }, 'client TLS handshake failed'),
    });
    this.mode = createMode(this);
  }

  /**
   * Starts a node and its listener. Everything it does to the world goes
   * through `deps` (clock, transport, disk, randomness; the real ones when
   * not given), so a simulation can run it with no real I/O at all.
   */
  static async start(config: ServerConfig, deps: NodeDeps): Promise<TicketingNode> {
    const env = realEnvironment(deps);
    const dirLock = config.memory ? undefined : DataDirLock.acquire(env.disk, config['data-dir'], `node ${config.node}, since ${new Date(env.clock.wallNow()).toISOString()}`);
    let node: TicketingNode | undefined;
    try {
      if (!config.memory) checkDataDirFormat(env.disk, config['data-dir']);
      // A priority cluster's tokens are a hybrid clock (cluster/hlc.ts), reserved ahead in time, not in count.
      const hlc = config.mode === 'priority' && config.peers.length > 0;
      const block = hlc ? clockReserveTokens(config['failover-timeout']) : config['token-reserve'];
      const mode: TokenMode = config.mode === 'raft' ? 'raft' : hlc ? 'priority' : 'single';
      // One token floor for every mode: the hybrid clock's scale (µs x 256), so a data
      // directory moved from one mode to another never sees a smaller token (a Raft leader's floor in µs
      // was 255 times below a priority cluster's tokens, and the first leader of a moved cluster may be a
      // node whose own mark lagged the active's, or one with a new disk: the clock covers it).
      const floorNow = clockFloor(env.clock.wallNow());
      let firstToken = floorNow;
      let reservation: TokenReservation | undefined;
      let recorded: RecordedMark | undefined;
      if (!config.memory) {
        ({ reservation, firstToken, recorded } = TokenReservation.open(env.disk, config['data-dir'], block, floorNow, mode));
      }
      if (recorded !== undefined && recorded.mode !== undefined && recorded.mode !== mode) {
        deps.logger.info({ recordedMode: recorded.mode, mode, firstToken: firstToken.toString() }, `this data directory's tokens were issued in ${recorded.mode} mode: tokens go on above them`);
      }
      // The recorded high-water mark runs at most two reservation blocks ahead of
      // the tokens issued; further ahead of the clock means the clock stepped back
      // (or, in a priority cluster, a peer's fast clock dragged the tokens ahead).
      // Marks written before every mode counted on the hybrid clock's scale are µs: far below, never ahead.
      const aheadMs = tokenWallMs(firstToken - floorNow);
      const reservedMs = tokenWallMs(BigInt(block));
      node = new TicketingNode(config, env, deps, reservation, dirLock, firstToken, recorded?.token ?? 0n);
      const started = node;
      if (aheadMs > 2 * reservedMs) {
        node.events.clockFloorWarnings++;
        deps.logger.warn(
          { behindMs: aheadMs },
          hlc
            ? 'the clock is behind the tokens this data directory holds: did it step back? (tokens stay increasing; this node promotes only once its peers vouch for it or its clock catches up)'
            : 'the clock is behind the tokens this data directory issued: did it step back? (tokens stay increasing)',
        );
      }
      if (reservation !== undefined) reservation.onFailure = (err) => started.fatal(new StorageError(`cannot reserve fencing tokens: ${err.message}`, { cause: err }));
      const { host, port } = splitHostPort(config.listen);
      await node.listener.listen(host, port);
      void node.listenAddress; // remember it while the listener can tell
      await node.mode.start();
      deps.logger.info({ node: node.nodeName, mode: node.mode.name, listen: node.listenAddress, memory: config.memory }, 'started');
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

  /** Raft mode: the log in memory (for the simulator's safety checks); undefined in other modes. */
  raftLog(): RaftLogView | undefined {
    return this.mode.raftLog?.();
  }

  /** Raft mode: membership changes and leadership transfer; undefined in other modes. */
  membership(): MembershipControl | undefined {
    return this.mode.membership;
  }

  status(): NodeStatus {
    const c = this.config;
    return {
      version: VERSION,
      cluster: c['cluster-name'],
      node: this.nodeName,
      mode: this.mode.name,
      role: this.role,
      listen: this.listenAddress,
      active: this.mode.activeAddress(),
      startedAt: new Date(this.startedAt).toISOString(),
      uptimeMs: this.clock.wallNow() - this.startedAt,
      locks: { held: this.mode.heldCount(), waiting: this.engine.waitingCount },
      connections: this.sessionCount,
      tokens: { next: this.engine.nextToken?.toString() ?? '-', highWater: this.reservation?.highWater.toString() },
      peers: this.mode.peers(),
      ...(this.mode.raftStatus === undefined ? {} : { raft: this.mode.raftStatus() }),
      ...(this.mode.replicationStatus?.() === undefined ? {} : { replication: this.mode.replicationStatus()! }),
      ...(this.mode.priorityStatus === undefined ? {} : { priority: this.mode.priorityStatus() }),
      config: {
        'data-dir': c.memory ? '(memory)' : c['data-dir'],
        'client-tokens': this.identities.count,
        'max-locks': c['max-locks'],
        'max-waiters-per-key': c['max-waiters-per-key'],
        'max-waiters': c['max-waiters'],
        'max-pending-per-conn': c['max-pending-per-conn'],
        'max-conns': c['max-conns'],
        'max-conns-per-address': c['max-conns-per-address'],
        'log-level': c['log-level'],
      },
    };
  }

  lockTable(): LockTable<LeasedRecord> | undefined {
    return this.mode.lockTable();
  }

  /**
   * A backup of what this node serves (`ticketing snapshot save`), or
   * undefined when it does not serve: only the serving node's table holds
   * every grant it answered (a Raft leader's, what it proposed too). The
   * floor is above every token issued or reserved here.
   */
  backup(): Backup | undefined {
    const table = this.mode.lockTable();
    if (this.redirectTarget() !== undefined || !this.engine.serving || table === undefined) return undefined;
    const reserved = this.reservation?.highWater ?? 0n;
    const floor = [table.nextToken, reserved, this.tokenFloor].reduce((a, b) => (b > a ? b : a));
    const raft = this.mode.raftStatus?.();
    const { locks } = table.snapshot();
    return { takenAt: new Date(this.clock.wallNow()).toISOString(), node: this.nodeName, mode: this.mode.name, tokenFloor: floor, index: raft?.lastIndex ?? 0, term: raft?.term ?? 0, locks };
  }

  /**
   * An operator's release (the admin API): applied by the engine as a
   * client's release is, and answered only when its replies could be: once
   * replicated (priority: written to the standbys, acknowledged with
   * sync-standbys) or committed (Raft).
   */
  async forceRelease(key: string, token: Token): Promise<ForceReleaseResult> {
    if (this.redirectTarget() !== undefined || !this.engine.serving) return 'not-serving';
    if (!this.engine.forceRelease(key, token)) return 'not-held';
    this.flushReplication();
    const index = this.gateIndex();
    if (index === undefined || index <= this.committedIndex()) return 'released';
    return new Promise((resolve) => this.releasesWaiting.push({ index, resolve }));
  }

  // --- ModeHost ---

  serve(log: LeasedLog, guard: TokenGuard): void {
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
      // Not committed while this node led: the next leader may or may not commit it.
      for (const w of this.releasesWaiting.splice(0)) w.resolve('unknown');
      // Stepping down: committed replies go out, the rest are dropped. Every session, not only those
      // with gated batches: an answer held behind a queued acquire may rest on uncommitted state too.
      for (const session of [...this.listener.sessions]) session.dropUncommitted();
      this.waitingForCommit.clear();
    }
    this.replyGate = gate;
  }

  commitAdvanced(): void {
    if (this.releasesWaiting.length > 0) {
      const commit = this.committedIndex();
      this.releasesWaiting = this.releasesWaiting.filter((w) => (w.index <= commit ? (w.resolve('released'), false) : true));
    }
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

  flushReplication(): void {
    this.mode.flushReplication?.();
  }

  reserveTokens(next: Token): boolean {
    return this.reservation?.admit(next) ?? true;
  }

  // --- SessionContext ---

  holdingReplies(): boolean {
    return this.replyGate !== undefined;
  }

  gateIndex(): number | undefined {
    return this.replyGate?.lastIndex();
  }

  committedIndex(): number {
    return this.replyGate?.commitIndex() ?? Number.MAX_SAFE_INTEGER;
  }

  awaitCommit(session: Session): void {
    this.waitingForCommit.add(session);
    if (this.replyGate?.holdLimitMs !== undefined) this.sweepHeldGrants();
  }

  heldGrantLimitMs(): number | undefined {
    return this.replyGate?.holdLimitMs;
  }

  /** While replies are held, grants past their hold deadline are answered T (checked every 50 ms). */
  private sweepHeldGrants(): void {
    if (this.sweep !== undefined) return;
    this.sweep = this.clock.schedule(HELD_GRANT_SWEEP_MS, () => {
      this.sweep = undefined;
      const now = this.clock.now();
      for (const session of [...this.waitingForCommit]) {
        session.expireHeldGrants(now);
        if (!session.hasHeldReplies) this.waitingForCommit.delete(session);
      }
      if (this.waitingForCommit.size > 0 && this.replyGate?.holdLimitMs !== undefined) this.sweepHeldGrants();
    });
  }

  get maxPendingPerConn(): number {
    return this.config['max-pending-per-conn'];
  }

  get tokensRequired(): boolean {
    return this.identities.count > 0;
  }

  identify(token: string, remote: string | undefined): ClientIdentity | 'throttled' | undefined {
    if (!this.authThrottle.allow(remote)) return 'throttled';
    const identity = this.identities.identify(token);
    if (identity === undefined) this.authThrottle.failed(remote);
    return identity;
  }

  redirectTarget(): string | undefined {
    return this.stopping === undefined ? this.mode.redirectTarget() : undefined;
  }

  sessionClosed(session: Session): void {
    this.listener.forget(session);
    this.waitingForCommit.delete(session);
  }

  sessionFailed(session: Session, code: ErrorCode, text: string): void {
    // An internal error was reported (internalError) with its stack already.
    if (code !== 'internal') this.logger.debug({ remote: session.remote, code, text }, 'closed a connection with an error');
    this.onSessionError(code);
  }

  internalError(err: Error, where = 'serving a client connection', fatal = false): void {
    this.events.internalErrors++;
    this.logger.error({ err, where }, 'internal error: a fault of the server itself (please report it)');
    this.onInternalError(err, where);
    // A safety assertion means this node's state cannot be trusted: stop (a supervisor restarts it
    // from what is durable), never go on serving (issue 27, D-9).
    if (fatal || err instanceof SafetyViolation) void this.shutdown(`${err instanceof SafetyViolation ? 'safety assertion' : 'internal error'}: ${err.message}`, 1);
  }

  // --- lifecycle ---

  /**
   * Applies settings that can change without a restart (SIGHUP): client
   * tokens, limits, timeouts, and the certificates of the client listener and
   * of peer links (both modes). Other changed settings keep their running
   * values and are named in a warning. Returns the keys that need a restart.
   */
  reload(next: ServerConfig): string[] {
    const tls = loadTls(next);
    if ((tls === undefined) !== (this.config['tls-cert'] === undefined)) {
      throw new RestartRequiredError('turning TLS on or off needs a restart; certificates and keys can be reloaded');
    }
    if (peerLinkKind(next) !== peerLinkKind(this.config)) {
      throw new RestartRequiredError('changing how peer links authenticate (peer token, certificates, or neither) needs a restart; tokens and certificates can be reloaded');
    }
    const { config, needsRestart } = planReload(this.config, next);
    this.config = config;
    this.identities.replace(config.clientIdentities);
    this.engine.limits = limitsOf(config);
    if (tls !== undefined) this.listener.updateTls(tls);
    // Peer certificates and peer tokens (rotation: peer-token-next) apply to links made from now on.
    const peerTlsReloaded = this.mode.updateTls?.() ?? false;
    this.logger.info({ clientTokens: this.identities.count, tlsReloaded: tls !== undefined, peerTlsReloaded }, 'configuration reloaded');
    if (needsRestart.length > 0) {
      this.logger.warn({ needsRestart }, `changed settings not applied (they need a restart): ${needsRestart.join(', ')}`);
    }
    return needsRestart;
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
    for (const w of this.releasesWaiting.splice(0)) w.resolve('unknown');
    for (const session of [...this.listener.sessions]) session.fail('unavailable', reason);
    if (exitCode !== 0) {
      // A node that cannot go on must exit even if its mode cannot stop cleanly.
      let bound: TimerHandle | undefined;
      await Promise.race([this.mode.stop().catch(() => {}), new Promise((r) => (bound = this.clock.schedule(SHUTDOWN_GRACE_MS, () => r(undefined))))]);
      bound?.cancel();
    }
    let grace: TimerHandle | undefined;
    await Promise.race([closed, new Promise((r) => (grace = this.clock.schedule(SHUTDOWN_GRACE_MS, () => r(undefined))))]);
    grace?.cancel();
    this.dirLock?.release();
    this.logger.info({ exitCode }, 'stopped');
    this.onExit(exitCode);
  }

  /** The node cannot go on safely (token reservation or storage failed: a disk error): stop serving at once. */
  fatal(err: Error): void {
    this.events.diskErrors++;
    this.logger.error({ err, dataDir: this.config['data-dir'] }, 'stopping: this node cannot go on safely');
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
