/**
 * One Ticketing node: wires storage, the lock table, the engine and the
 * client listener together, and owns the node's lifecycle (start, graceful
 * shutdown, fatal stop).
 */
import type { ErrorCode } from '@ticketing/protocol';
import type { Logger } from 'pino';
import { systemClock, type Clock } from '../engine/clock.js';
import { LockEngine, leasedRecord } from '../engine/lock-engine.js';
import { ClientListener } from '../net/client-listener.js';
import { joinHostPort, splitHostPort } from '../net/address.js';
import { ClientTokens } from '../session/client-tokens.js';
import type { Session, SessionContext } from '../session/session.js';
import { LocalLog } from '../state-machine/local-log.js';
import { LockTable } from '../state-machine/lock-table.js';
import { DataDirLock } from '../storage/data-dir-lock.js';
import { TokenReservation, unixMicros } from '../storage/token-reservation.js';
import type { ServerConfig } from '../config/load.js';
import { VERSION } from '../version.js';
import type { NodeRole, NodeStatus, NodeView } from './node-view.js';

/** Longest a graceful shutdown waits for clients to read their last replies. */
const SHUTDOWN_GRACE_MS = 5_000;

export class TicketingNode implements SessionContext, NodeView {
  readonly engine: LockEngine;
  readonly nodeName: string;
  readonly role: NodeRole = 'single';
  onSessionError: (code: ErrorCode) => void = () => {};
  private readonly listener: ClientListener;
  private readonly clientTokens: ClientTokens;
  private stopping: Promise<void> | undefined;
  private readonly startedAt = new Date();

  private constructor(
    private config: ServerConfig,
    private readonly logger: Logger,
    private readonly table: LockTable,
    private readonly reservation: TokenReservation | undefined,
    private readonly dirLock: DataDirLock | undefined,
    clock: Clock,
    private readonly onExit: (code: number) => void,
  ) {
    this.nodeName = config.node;
    this.clientTokens = new ClientTokens(config['client-tokens']);
    this.engine = new LockEngine(new LocalLog(table), clock, limitsOf(config), reservation?.admit);
    this.listener = new ClientListener(this, { maxConns: () => this.config['max-conns'] });
  }

  /** Starts a node and its listener; `onExit` is called when the node has stopped, with the exit code. */
  static async start(config: ServerConfig, logger: Logger, onExit: (code: number) => void): Promise<TicketingNode> {
    const dirLock = config.memory ? undefined : DataDirLock.acquire(config['data-dir']);
    try {
      let firstToken = unixMicros();
      let reservation: TokenReservation | undefined;
      if (!config.memory) {
        ({ reservation, firstToken } = TokenReservation.open(config['data-dir'], config['token-reserve'], firstToken));
      }
      const node = new TicketingNode(config, logger, new LockTable(firstToken, leasedRecord), reservation, dirLock, systemClock, onExit);
      if (reservation !== undefined) reservation.onFailure = (err) => node.fatal(err);
      return await node.listen();
    } catch (err) {
      dirLock?.release();
      throw err;
    }
  }

  private async listen(): Promise<this> {
    const { host, port } = splitHostPort(this.config.listen);
    await this.listener.listen(host, port);
    this.logger.info(
      { node: this.nodeName, listen: this.listenAddress, firstToken: this.table.nextToken.toString(), memory: this.config.memory },
      'serving',
    );
    return this;
  }

  get listenAddress(): string {
    const a = this.listener.address;
    return joinHostPort(a.address, a.port);
  }

  get sessionCount(): number {
    return this.listener.sessions.size;
  }

  status(): NodeStatus {
    const c = this.config;
    return {
      version: VERSION,
      node: this.nodeName,
      mode: 'single',
      role: this.stopping === undefined ? this.role : 'stopping',
      listen: this.listenAddress,
      active: this.listenAddress,
      startedAt: this.startedAt.toISOString(),
      uptimeMs: Date.now() - this.startedAt.getTime(),
      locks: { held: this.engine.heldCount, waiting: this.engine.waitingCount },
      connections: this.sessionCount,
      tokens: { next: this.table.nextToken.toString(), highWater: this.reservation?.highWater.toString() },
      peers: [],
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

  // --- SessionContext ---

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
    return undefined;
  }

  sessionClosed(session: Session): void {
    this.listener.forget(session);
  }

  sessionFailed(session: Session, code: ErrorCode, text: string): void {
    this.logger.debug({ remote: session.remote, code, text }, 'closed a connection with an error');
    this.onSessionError(code);
  }

  // --- lifecycle ---

  /** Applies settings that can change without a restart (SIGHUP): client tokens and limits. */
  reload(config: ServerConfig): void {
    this.config = config;
    this.clientTokens.replace(config['client-tokens']);
    this.engine.limits = limitsOf(config);
    this.logger.info({ clientTokens: this.clientTokens.count }, 'configuration reloaded');
  }

  /**
   * Graceful shutdown: stop accepting, answer every waiting acquire `T`,
   * write `E unavailable shutting down` to each connection, close, exit.
   */
  async shutdown(reason = 'shutting down', exitCode = 0): Promise<void> {
    this.stopping ??= this.stop(reason, exitCode);
    return this.stopping;
  }

  private async stop(reason: string, exitCode: number): Promise<void> {
    this.logger.info({ reason }, 'stopping');
    const closed = this.listener.close();
    this.engine.stop();
    for (const session of this.listener.sessions) session.fail('unavailable', reason);
    await Promise.race([closed, new Promise((r) => setTimeout(r, SHUTDOWN_GRACE_MS).unref())]);
    this.dirLock?.release();
    this.logger.info({ exitCode }, 'stopped');
    this.onExit(exitCode);
  }

  /** The node cannot go on safely (e.g. token reservation failed): stop serving at once. */
  private fatal(err: Error): void {
    this.logger.error({ err: err.message, dataDir: this.config['data-dir'] }, 'cannot reserve fencing tokens; stopping rather than risk a repeated token');
    void this.shutdown(`cannot reserve fencing tokens: ${err.message}`, 1);
  }

}

function limitsOf(config: ServerConfig) {
  return {
    maxLocks: config['max-locks'],
    maxWaitersPerKey: config['max-waiters-per-key'],
    maxWaiters: config['max-waiters'],
  };
}
