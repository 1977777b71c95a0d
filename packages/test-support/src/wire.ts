/**
 * A raw protocol connection for black-box tests: send bytes, read reply
 * lines with deadlines, observe the close. Knows nothing of the protocol
 * beyond lines.
 */
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { LineSplitter } from './lines.js';

/** How tests reach the server: plain TCP, or TLS with these options. */
export interface Transport {
  readonly name: string;
  connect(host: string, port: number): Socket;
}

export const plainTcp: Transport = {
  name: 'tcp',
  connect: (host, port) => netConnect({ host, port, allowHalfOpen: true }),
};

export function tlsTransport(options: ConnectionOptions): Transport {
  return { name: 'tls', connect: (host, port) => tlsConnect({ host, port, ...options }) };
}

export class Wire {
  private readonly splitter = new LineSplitter();
  private lines: string[] = [];
  private waiters: Array<() => void> = [];
  closed = false;
  /** Time (performance.now) each line arrived, in order. */
  readonly arrivals: number[] = [];

  private constructor(readonly socket: Socket) {
    socket.on('data', (d: Buffer) => {
      this.splitter.push(d, (line) => {
        this.lines.push(line);
        this.arrivals.push(performance.now());
      });
      this.wake();
    });
    socket.on('end', () => socket.end());
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
    socket.on('error', () => {});
  }

  static async open(port: number, host = '127.0.0.1', transport: Transport = plainTcp): Promise<Wire> {
    const socket = transport.connect(host, port);
    await new Promise<void>((resolve, reject) => {
      socket.once(transport.name === 'tls' ? 'secureConnect' : 'connect', () => resolve());
      socket.once('error', reject);
    });
    return new Wire(socket);
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  send(data: string | Buffer): void {
    this.socket.write(data);
  }

  /** Sends FIN (half-close): the server drops this connection's waiters. */
  finish(): void {
    this.socket.end();
  }

  destroy(): void {
    this.socket.destroy();
  }

  /** Lines received and not yet read. */
  get unread(): readonly string[] {
    return this.lines;
  }

  /** The next line; rejects if none arrives within `ms` or the connection closes first. */
  async line(ms = 3_000): Promise<string> {
    const deadline = performance.now() + ms;
    for (;;) {
      const l = this.lines.shift();
      if (l !== undefined) return l;
      if (this.closed) throw new Error('connection closed while waiting for a line');
      const left = deadline - performance.now();
      if (left <= 0) throw new Error(`no line within ${ms} ms`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  /** The next `n` lines. */
  async lineCount(n: number, ms = 3_000): Promise<string[]> {
    const out: string[] = [];
    for (let i = 0; i < n; i++) out.push(await this.line(ms));
    return out;
  }

  /** Sends `request` and returns the next line. */
  async ask(request: string, ms = 3_000): Promise<string> {
    this.send(request.endsWith('\n') ? request : `${request}\n`);
    return this.line(ms);
  }

  /** Resolves true if the server closes the connection within `ms`. */
  async closedWithin(ms = 3_000): Promise<boolean> {
    const deadline = performance.now() + ms;
    while (!this.closed) {
      const left = deadline - performance.now();
      if (left <= 0) return false;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    return true;
  }

  /** Asserts nothing arrives for `ms`. */
  async silentFor(ms: number): Promise<boolean> {
    await new Promise((r) => setTimeout(r, ms));
    return this.lines.length === 0;
  }
}

export function tokenOf(grant: string): bigint {
  const m = /^A (\d+) /.exec(grant);
  if (m === null) throw new Error(`not a grant: ${grant}`);
  return BigInt(m[1]!);
}
