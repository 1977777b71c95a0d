/**
 * An in-memory network for tests: listeners by "host:port", streams as pairs
 * of in-process pipes. Bytes are delivered one event-loop turn after they are
 * written (never inside `write`), in order; `end` is a FIN, `destroy` closes
 * both sides. A starting point for the whole-node simulator, which will drive
 * delivery from its own scheduler instead of setImmediate.
 */
import { EventEmitter } from 'node:events';
import type { SecureContextOptions } from 'node:tls';
import type { ConnectOptions, ListenOptions, Listener, Stream, StreamEvents, Transport } from '../../src/seams/transport.js';
import { modelTlsHandshake } from '../../src/seams/tls-model.js';

export class MemoryStream extends EventEmitter implements Stream {
  private peer: MemoryStream | undefined;
  /** Written before the connection was accepted. */
  private outbox: Buffer[] = [];
  writableLength = 0;
  private paused = false;
  private inbox: Buffer[] = [];
  private finPending = false;
  private finReceived = false;
  private ended = false;
  private closed = false;

  constructor(
    readonly remoteAddress: string,
    readonly remotePort: number,
    private readonly onClose: () => void = () => {},
  ) {
    super();
  }

  override on<E extends keyof StreamEvents>(event: E, listener: StreamEvents[E]): this {
    return super.on(event, listener);
  }

  write(data: string | Uint8Array): boolean {
    if (this.ended || this.closed) return false;
    const chunk = typeof data === 'string' ? Buffer.from(data) : Buffer.from(data);
    const peer = this.peer;
    if (peer === undefined) this.outbox.push(chunk);
    else setImmediate(() => peer.receive(chunk));
    return true;
  }

  /** Joins two ends; what this end wrote before goes first. */
  static pair(a: MemoryStream, b: MemoryStream): void {
    a.peer = b;
    b.peer = a;
    for (const chunk of a.outbox.splice(0)) setImmediate(() => b.receive(chunk));
  }

  end(data?: string): void {
    if (data !== undefined) this.write(data);
    if (this.ended) return;
    this.ended = true;
    const peer = this.peer;
    setImmediate(() => peer?.receiveFin());
    // Both halves ended: the connection is over.
    if (this.finReceived) setImmediate(() => this.destroy());
  }

  destroy(): void {
    if (this.closed) return;
    const peer = this.peer;
    this.close();
    setImmediate(() => peer?.close());
  }

  resetAndDestroy(): void {
    this.destroy();
  }

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
    const waiting = this.inbox;
    this.inbox = [];
    for (const chunk of waiting) this.emit('data', chunk);
    if (this.finPending) this.receiveFin();
  }

  private receive(chunk: Buffer): void {
    if (this.closed) return;
    if (this.paused) this.inbox.push(chunk);
    else this.emit('data', chunk);
  }

  private receiveFin(): void {
    if (this.closed) return;
    if (this.paused && this.inbox.length > 0) {
      this.finPending = true;
      return;
    }
    this.finPending = false;
    this.finReceived = true;
    this.emit('end');
    if (this.ended) setImmediate(() => this.destroy());
  }

  private close(): void {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
    this.emit('close');
  }
}

class MemoryListener implements Listener {
  readonly streams = new Set<MemoryStream>();
  private closing: (() => void) | undefined;

  constructor(
    private readonly network: MemoryTransport,
    readonly key: string,
    readonly host: string,
    readonly port: number,
    readonly accept: (stream: Stream) => void,
    readonly admit: ListenOptions['admit'],
    /** Its TLS settings: handshakes are modelled, not run (seams/tls-model.ts). */
    readonly tls: ListenOptions['tls'],
  ) {}

  address(): { address: string; port: number } {
    return { address: this.host, port: this.port };
  }

  updateTls(_context: SecureContextOptions): void {}

  forget(stream: MemoryStream): void {
    this.streams.delete(stream);
    if (this.streams.size === 0) this.closing?.();
  }

  async close(): Promise<void> {
    this.network.unlisten(this.key);
    if (this.streams.size === 0) return;
    await new Promise<void>((resolve) => (this.closing = resolve));
  }
}

export class MemoryTransport implements Transport {
  private readonly listeners = new Map<string, MemoryListener>();
  private nextPort = 40_000;

  async listen(options: ListenOptions, onStream: (stream: Stream) => void): Promise<Listener> {
    const port = options.port === 0 ? this.nextPort++ : options.port;
    const key = `${options.host}:${port}`;
    if (this.listeners.has(key)) throw Object.assign(new Error(`listen EADDRINUSE ${key}`), { code: 'EADDRINUSE' });
    const listener = new MemoryListener(this, key, options.host, port, onStream, options.admit, options.tls);
    this.listeners.set(key, listener);
    return Promise.resolve(listener);
  }

  unlisten(key: string): void {
    this.listeners.delete(key);
  }

  connect(options: ConnectOptions, onConnect: () => void): Stream {
    const clientPort = this.nextPort++;
    const client = new MemoryStream(options.host, options.port);
    const listener = this.listeners.get(`${options.host}:${options.port}`);
    setImmediate(() => {
      if (listener === undefined || !this.listeners.has(listener.key)) {
        client.emit('error', Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
        client.destroy();
        return;
      }
      const server: MemoryStream = new MemoryStream('127.0.0.1', clientPort, () => listener.forget(server));
      MemoryStream.pair(client, server);
      listener.streams.add(server);
      const release = listener.admit === undefined ? () => {} : listener.admit(server.remoteAddress, { remoteAddress: server.remoteAddress, remotePort: server.remotePort, close: () => server.destroy() });
      if (release === undefined) {
        server.destroy();
        return;
      }
      server.on('close', release);
      const failure = modelTlsHandshake(listener.tls, options.tls);
      if (failure !== undefined) {
        if (failure.kind === 'error') client.emit('error', failure.error);
        server.destroy();
        return;
      }
      listener.accept(server);
      onConnect();
    });
    return client;
  }
}
