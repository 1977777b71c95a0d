/**
 * A TCP proxy the tests control, between a client and a server or between two
 * nodes: it plays the network faults a lock service must survive, without
 * touching the processes.
 *
 * - `cut()`: every connection is closed and new ones are refused until
 *   `heal()`; by `destroy()` (what the kernel chooses), an orderly FIN
 *   (`'fin'`), or a reset (`'rst'`).
 * - `blackHole()`: a silent partition. Nothing passes, nothing is closed: no
 *   FIN, no RST, the sockets stay open as over a dead route. Bytes are held,
 *   not lost, and flow again at `heal()`, as TCP's retransmissions would
 *   deliver them; a connection that should die, the test cuts. New
 *   connections are accepted (the proxy cannot drop a SYN) and stall too.
 *   One direction only (`'to-target'`, `'to-client'`) is a one-way partition.
 * - `delay(ms)`: every chunk (and FIN) waits `ms` before it passes, in order,
 *   per direction or both.
 * - With `lines: true`, each client-to-server line is recorded (`Link.sent`)
 *   and may be cut or dropped by a hook (`onRequest`), and replies may be
 *   held back per link (`Link.hold`).
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import { LineSplitter } from './lines.js';

/** `to-target`: from the connecting side to the proxied server; `to-client`: back. */
export type Direction = 'to-target' | 'to-client';
export type Directions = Direction | 'both';
/** How a connection is closed: `destroy()` (FIN, or RST when unread data is pending), FIN, or RST. */
export type CutMode = 'destroy' | 'fin' | 'rst';
/** What the proxy does with a client line: pass it on; pass it, then cut before the reply; or cut without passing it. */
export type RequestAction = 'forward' | 'cut' | 'drop';

const END = Symbol('end');
const CLOSE = Symbol('close');
type Item = Buffer | typeof END | typeof CLOSE;

function directions(d: Directions): Direction[] {
  return d === 'both' ? ['to-target', 'to-client'] : [d];
}

function closeSocket(s: Socket, mode: CutMode): void {
  if (s.destroyed) return;
  if (mode === 'fin') s.end();
  else if (mode === 'rst') s.resetAndDestroy();
  else s.destroy();
}

/**
 * One direction of one link: delivers chunks, FIN and close in order, after
 * the proxy's delay for that direction, and not at all while it is stalled.
 */
class Pipe {
  private readonly queue: Array<{ item: Item; due: number }> = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly proxy: TcpProxy,
    readonly direction: Direction,
    private readonly deliver: (item: Item) => void,
  ) {}

  push(item: Item): void {
    this.queue.push({ item, due: performance.now() + this.proxy.delayOf(this.direction) });
    this.flush();
  }

  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.proxy.stalled(this.direction)) return;
    while (this.queue.length > 0) {
      const wait = this.queue[0]!.due - performance.now();
      if (wait > 0) {
        this.timer = setTimeout(() => this.flush(), wait);
        return;
      }
      this.deliver(this.queue.shift()!.item);
    }
  }

  discard(): void {
    clearTimeout(this.timer);
    this.queue.length = 0;
  }
}

/** One client connection and its upstream connection. */
export class Link {
  /** Lines the client sent through this link (with `lines: true`). */
  readonly sent: string[] = [];
  closed = false;
  /** Server-to-client bytes are held back while this is set, then delivered after it resolves. */
  hold: Promise<void> | undefined;
  /** Called with each client line before it is forwarded (with `lines: true`). */
  onRequest: ((line: string) => RequestAction) | undefined;
  /** @internal */
  readonly pipes: Pipe[] = [];

  constructor(
    readonly client: Socket,
    readonly server: Socket,
  ) {}

  /** Closes both sides at once (see CutMode); nothing more passes. */
  cut(mode: CutMode = 'destroy'): void {
    this.closed = true;
    for (const p of this.pipes) p.discard();
    closeSocket(this.client, mode);
    closeSocket(this.server, mode);
  }
}

export interface ProxyOptions {
  /** The port to listen on (default 0: any free port). */
  readonly port?: number;
  readonly targetHost?: string;
  /** Split client-to-server bytes into lines: record them and run `onRequest` (default false: raw bytes). */
  readonly lines?: boolean;
}

export class TcpProxy {
  /** Every link ever accepted, in order (closed ones too). */
  readonly links: Link[] = [];
  /** New links get this hook. */
  onRequest: Link['onRequest'];
  /** Kept from the listen, so it still reads after close(). */
  private boundPort = 0;
  private refusing: CutMode | undefined;
  private readonly stall = new Set<Direction>();
  private readonly delays = new Map<Direction, number>();

  private constructor(
    private readonly server: Server,
    private targetPort: number,
    private readonly targetHost: string,
    private readonly lines: boolean,
  ) {}

  /** Listens on 127.0.0.1 and forwards every connection to `targetHost:targetPort`. */
  static async start(targetPort: number, options: ProxyOptions = {}): Promise<TcpProxy> {
    const server = createServer({ allowHalfOpen: true });
    const proxy = new TcpProxy(server, targetPort, options.targetHost ?? '127.0.0.1', options.lines === true);
    server.on('connection', (client) => proxy.accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
    });
    proxy.boundPort = (server.address() as { port: number }).port;
    return proxy;
  }

  get port(): number {
    return this.boundPort;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  get openLinks(): Link[] {
    return this.links.filter((l) => !l.closed);
  }

  /** @internal */
  delayOf(direction: Direction): number {
    return this.delays.get(direction) ?? 0;
  }

  /** @internal */
  stalled(direction: Direction): boolean {
    return this.stall.has(direction);
  }

  /** Closes every connection and refuses new ones until heal() (accepts and destroys them; with 'rst', resets them). */
  cut(mode: CutMode = 'destroy'): void {
    this.refusing = mode;
    this.cutAll(mode);
  }

  /** Closes every open connection; new ones are still accepted. */
  cutAll(mode: CutMode = 'destroy'): void {
    for (const l of this.links) l.cut(mode);
  }

  /** Silently stops everything in `direction` (see the top of this file) until heal(). */
  blackHole(direction: Directions = 'both'): void {
    for (const d of directions(direction)) this.stall.add(d);
  }

  /** Ends cut() and blackHole(): new connections pass, held bytes flow on. Delays stay. */
  heal(): void {
    this.refusing = undefined;
    this.stall.clear();
    for (const l of this.links) for (const p of l.pipes) p.flush();
  }

  /** Holds every chunk for `ms` before passing it on, in order (0: no delay). */
  delay(ms: number, direction: Directions = 'both'): void {
    for (const d of directions(direction)) this.delays.set(d, ms);
  }

  /** New connections go to `port` from now on. */
  retarget(port: number): void {
    this.targetPort = port;
  }

  async close(): Promise<void> {
    this.cut();
    // A link cut with FIN may still be half open; the listener closes only when every socket has.
    for (const l of this.links) for (const s of [l.client, l.server]) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    if (this.refusing !== undefined) {
      client.on('error', () => {});
      closeSocket(client, this.refusing === 'fin' ? 'destroy' : this.refusing);
      return;
    }
    const upstream = connect({ port: this.targetPort, host: this.targetHost, allowHalfOpen: true });
    const link = new Link(client, upstream);
    link.onRequest = this.onRequest;
    this.links.push(link);

    const write = (to: Socket, item: Item) => {
      if (item === CLOSE) to.destroy();
      else if (to.destroyed || to.writableEnded) return;
      else if (item === END) to.end();
      else to.write(item);
    };
    const toTarget = new Pipe(this, 'to-target', (item) => write(upstream, item));
    const toClient = new Pipe(this, 'to-client', (item) => {
      const deliver = () => write(client, item);
      // A hold delays the server's bytes and FIN, not its close.
      if (link.hold === undefined || item === CLOSE) deliver();
      else void link.hold.then(deliver);
    });
    link.pipes.push(toTarget, toClient);

    if (this.lines) {
      const splitter = new LineSplitter();
      client.on('data', (d: Buffer) =>
        splitter.push(d, (line) => {
          link.sent.push(line);
          const action = link.onRequest?.(line) ?? 'forward';
          if (action === 'drop') {
            link.cut();
            return false;
          }
          // 'cut': the request reaches the server, its reply never reaches the client.
          if (action === 'cut') link.hold = new Promise(() => {});
          toTarget.push(Buffer.from(`${line}\n`, 'utf8'));
          if (action === 'cut') {
            setTimeout(() => link.cut(), 100);
            return false;
          }
          return true;
        }),
      );
    } else {
      client.on('data', (d: Buffer) => toTarget.push(d));
    }
    upstream.on('data', (d: Buffer) => toClient.push(d));
    client.on('end', () => toTarget.push(END));
    upstream.on('end', () => toClient.push(END));
    // A side that closes closes the other, after what it sent (and only once the fault lets it through).
    client.on('close', () => {
      link.closed = true;
      toTarget.push(CLOSE);
    });
    upstream.on('close', () => {
      link.closed = true;
      toClient.push(CLOSE);
    });
    client.on('error', () => {});
    upstream.on('error', () => {});
  }
}
