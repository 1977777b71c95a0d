/**
 * The client listener, plain TCP or TLS: accepts connections, enforces the
 * connection limit (`E unavailable` at accept time), gives each connection a
 * Session, and sweeps out connections that hold resources without using them
 * (idle past the idle timeout, or trickling a line past the line timeout).
 */
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { formatError } from '@ticketing/protocol';
import { Session, type SessionContext } from '../session/session.js';
import type { TlsMaterial } from './tls-config.js';

export interface ListenerOptions {
  /** Read at each accept, so a reload can change it. */
  readonly maxConns: () => number;
  readonly idleTimeoutMs: () => number;
  readonly lineTimeoutMs: () => number;
  readonly tls: TlsMaterial | undefined;
  readonly onTlsError?: (err: Error, remote: string | undefined) => void;
}

const SWEEP_MS = 1_000;

export class ClientListener {
  readonly sessions = new Set<Session>();
  private readonly server: Server;
  private readonly sweeper: NodeJS.Timeout;
  private accepting = true;

  constructor(
    private readonly ctx: SessionContext,
    private readonly options: ListenerOptions,
  ) {
    // allowHalfOpen: a client's FIN drops its waiters, but replies already
    // decided are still written before the server closes its side.
    const tls = options.tls;
    if (tls === undefined) {
      this.server = createServer({ allowHalfOpen: true, noDelay: true }, (socket) => this.accept(socket));
    } else {
      this.server = createTlsServer(
        {
          ...tls.context,
          allowHalfOpen: true,
          noDelay: true,
          requestCert: tls.requireClientCert,
          rejectUnauthorized: tls.requireClientCert,
          handshakeTimeout: tls.handshakeTimeoutMs,
        },
        (socket: TLSSocket) => this.accept(socket),
      );
      // With a listener for it, Node leaves a failed (or timed-out) handshake's socket open: close it.
      this.server.on('tlsClientError', (err: Error, socket: TLSSocket) => {
        options.onTlsError?.(err, socket.remoteAddress);
        socket.destroy();
      });
    }
    this.sweeper = setInterval(() => this.sweep(), SWEEP_MS).unref();
  }

  /** New certificates for new connections (SIGHUP); connections already open keep theirs. */
  updateTls(tls: TlsMaterial): void {
    (this.server as ReturnType<typeof createTlsServer>).setSecureContext(tls.context);
  }

  private sweep(): void {
    const now = performance.now();
    const idle = this.options.idleTimeoutMs();
    const line = this.options.lineTimeoutMs();
    for (const session of this.sessions) session.checkTimeouts(now, idle, line);
  }

  async listen(host: string, port: number): Promise<AddressInfo> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen({ host, port, backlog: 4096 }, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    return this.server.address() as AddressInfo;
  }

  get address(): AddressInfo {
    return this.server.address() as AddressInfo;
  }

  private accept(socket: Socket): void {
    if (!this.accepting || this.sessions.size >= this.options.maxConns()) {
      socket.on('error', () => {});
      socket.end(formatError('unavailable', this.accepting ? 'too many connections; try later or another node' : 'shutting down'));
      setTimeout(() => socket.destroy(), 1_000).unref();
      return;
    }
    const session = new Session(socket, this.ctx);
    this.sessions.add(session);
  }

  /** Called by the context when a session's socket has closed. */
  forget(session: Session): void {
    this.sessions.delete(session);
  }

  /** Stops accepting; resolves when every connection has closed. */
  async close(): Promise<void> {
    this.accepting = false;
    clearInterval(this.sweeper);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
