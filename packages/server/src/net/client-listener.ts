/**
 * The client listener, plain TCP or TLS: accepts connections, enforces the
 * connection limit (`E unavailable` at accept time), gives each connection a
 * Session, and sweeps out connections that hold resources without using them
 * (idle past the idle timeout, or trickling a line past the line timeout).
 */
import { formatError } from '@ticketing/protocol';
import type { Clock, TimerHandle } from '../seams/clock.js';
import type { Listener, Stream, Transport } from '../seams/transport.js';
import { Session, type SessionContext } from '../session/session.js';
import type { TlsMaterial } from './tls-config.js';
import type { Logger } from 'pino';
import { AcceptGuard } from './accept-guard.js';

export interface ListenerOptions {
  /** Read at each accept, so a reload can change it. */
  readonly maxConns: () => number;
  readonly maxConnsPerAddress: () => number;
  /** How long a connection may take to send `H` when client tokens are required. */
  readonly helloTimeoutMs: () => number;
  readonly idleTimeoutMs: () => number;
  readonly lineTimeoutMs: () => number;
  readonly tls: TlsMaterial | undefined;
  readonly onTlsError?: (err: Error, remote: string | undefined) => void;
  readonly logger: Logger;
}

const SWEEP_MS = 1_000;
/** How long a refused connection may take to read its `E` line. */
const REFUSED_GRACE_MS = 1_000;

export class ClientListener {
  readonly sessions = new Set<Session>();
  private listener: Listener | undefined;
  private sweeper: TimerHandle | undefined;
  private accepting = true;
  /** Every connection open, from accept (before TLS, before H) to close, in all and per address. */
  readonly guard: AcceptGuard;

  constructor(
    private readonly ctx: SessionContext,
    private readonly transport: Transport,
    private readonly clock: Clock,
    private readonly options: ListenerOptions,
  ) {
    this.guard = new AcceptGuard({ maxConns: options.maxConns, maxPerAddress: options.maxConnsPerAddress }, clock, options.logger, 'client');
  }

  /** New certificates for new connections (SIGHUP); connections already open keep theirs. */
  updateTls(tls: TlsMaterial): void {
    this.listener?.updateTls(tls.context);
  }

  private sweep(): void {
    const now = this.clock.now();
    const idle = this.options.idleTimeoutMs();
    const line = this.options.lineTimeoutMs();
    const hello = this.options.helloTimeoutMs();
    for (const session of this.sessions) session.checkTimeouts(now, idle, line, hello);
  }

  async listen(host: string, port: number): Promise<{ address: string; port: number }> {
    const tls = this.options.tls;
    this.listener = await this.transport.listen(
      {
        host,
        port,
        backlog: 4096,
        admit: this.guard.admit,
        onError: this.guard.onError,
        ...(tls === undefined
          ? {}
          : { tls: { context: tls.context, requestCert: tls.requireClientCert, handshakeTimeoutMs: tls.handshakeTimeoutMs, onHandshakeError: this.options.onTlsError } }),
      },
      (stream) => this.accept(stream),
    );
    this.sweeper = this.clock.every(SWEEP_MS, () => this.sweep());
    return this.listener.address();
  }

  get address(): { address: string; port: number } {
    return this.listener!.address();
  }

  private accept(stream: Stream): void {
    const refusal = this.accepting ? this.guard.refusal(stream.remoteAddress) : 'shutting down';
    if (refusal !== undefined) {
      stream.on('error', () => {});
      stream.end(formatError('unavailable', refusal));
      this.clock.schedule(REFUSED_GRACE_MS, () => stream.destroy());
      return;
    }
    const session = new Session(stream, this.ctx);
    this.sessions.add(session);
  }

  /** Called by the context when a session's stream has closed. */
  forget(session: Session): void {
    this.sessions.delete(session);
  }

  /** Stops accepting; resolves when every connection has closed. */
  async close(): Promise<void> {
    this.accepting = false;
    this.sweeper?.cancel();
    await this.listener?.close();
  }
}
