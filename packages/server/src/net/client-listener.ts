/**
 * The client listener: accepts connections, enforces the connection limit
 * (`E unavailable` at accept time), and gives each connection a Session.
 */
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { formatError } from '@ticketing/protocol';
import { Session, type SessionContext } from '../session/session.js';

export interface ListenerOptions {
  /** Read at each accept, so a reload can change it. */
  readonly maxConns: () => number;
}

export class ClientListener {
  readonly sessions = new Set<Session>();
  private readonly server: Server;
  private accepting = true;

  constructor(
    private readonly ctx: SessionContext,
    private readonly options: ListenerOptions,
  ) {
    // allowHalfOpen: a client's FIN drops its waiters, but replies already
    // decided are still written before the server closes its side.
    this.server = createServer({ allowHalfOpen: true, noDelay: true }, (socket) => this.accept(socket));
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
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
