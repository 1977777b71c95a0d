/**
 * A network of simulated hosts with TCP-like byte streams: in order within a
 * connection, cut into random chunks, delayed by a random latency, with
 * back-pressure. Faults act per direction between two hosts:
 *
 * - `drop` (a silent black hole): bytes and connection attempts vanish; no
 *   FIN, no RST. Only the application's own timeouts notice.
 * - `reset`: every connection between them is reset now, and new attempts
 *   are refused, as when a firewall rejects.
 *
 * A host's process can die (its peers see the connection close: FIN, or RST
 * when bytes were unread) or its machine can vanish (its peers see nothing at
 * all). Either way the host refuses connections until a new process listens.
 */
import { EventEmitter } from 'node:events';
import { CPU_COST, type Scheduler } from './scheduler.js';

export interface NetworkOptions {
  /** One-way delay of a chunk, ms. */
  minLatency: number;
  maxLatency: number;
  /** Largest piece a write is cut into (chunks arrive separately: framing must cope). */
  maxChunk: number;
  /** Bytes in flight per connection direction before write() says to wait. */
  highWaterMark: number;
}

export const DEFAULT_NETWORK: NetworkOptions = { minLatency: 0.05, maxLatency: 2, maxChunk: 1500, highWaterMark: 64 * 1024 };

type LinkFault = 'drop' | 'reset';

/** How often bytes stuck in a black hole are tried again. */
const RETRANSMIT_MS = 200;

function describe(item: Buffer | 'end'): string {
  return item === 'end' ? 'FIN' : `${item.length} B`;
}

/** A socket end, shaped like the part of node:net's Socket the node uses. */
export class SimSocket extends EventEmitter {
  peer: SimSocket | undefined;
  remoteAddress: string;
  remotePort: number;
  localAddress: string;
  localPort: number;
  /** Bytes written and not yet delivered to the peer. */
  private inFlight = 0;
  /** Chunks (and our FIN) on their way to the peer, in order: TCP delivers in order or not at all. */
  private readonly outQueue: Array<{ item: Buffer | 'end'; due: number }> = [];
  private pumping = false;
  private wantDrain = false;
  private ended = false;
  private peerEnded = false;
  destroyed = false;
  private pausedReads = false;
  private backlog: Array<Buffer | 'end'> = [];

  constructor(
    private readonly net: SimNetwork,
    readonly host: string,
    local: { address: string; port: number },
    remote: { address: string; port: number },
  ) {
    super();
    this.localAddress = local.address;
    this.localPort = local.port;
    this.remoteAddress = remote.address;
    this.remotePort = remote.port;
  }

  get writableLength(): number {
    return this.inFlight;
  }

  /** Writing is still possible (not ended, not destroyed). */
  get writable(): boolean {
    return !this.destroyed && !this.ended;
  }

  setNoDelay(): this {
    return this;
  }

  setKeepAlive(): this {
    return this;
  }

  write(data: string | Uint8Array, cb?: (err?: Error) => void): boolean {
    if (this.destroyed || this.ended) {
      cb?.(new Error('write after end'));
      return false;
    }
    const buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data);
    this.net.spend(CPU_COST.socketWrite + buf.length * CPU_COST.socketByte);
    this.net.transmit(this, buf);
    cb?.();
    if (this.inFlight > this.net.options.highWaterMark) {
      this.wantDrain = true;
      return false;
    }
    return true;
  }

  /** Half-close: FIN after everything written so far. */
  end(data?: string | Uint8Array): this {
    if (data !== undefined) this.write(data);
    if (this.ended || this.destroyed) return this;
    this.ended = true;
    this.net.transmitEnd(this);
    this.maybeClose();
    return this;
  }

  destroy(err?: Error): this {
    if (this.destroyed) return this;
    this.destroyed = true;
    this.net.abort(this);
    if (err !== undefined) this.emit('error', err);
    this.emit('close', err !== undefined);
    return this;
  }

  /** RST: the simulated network resets the peer on every abrupt close (see destroy). */
  resetAndDestroy(): this {
    return this.destroy();
  }

  pause(): this {
    this.pausedReads = true;
    return this;
  }

  resume(): this {
    this.pausedReads = false;
    while (!this.pausedReads && this.backlog.length > 0 && !this.destroyed) this.deliver(this.backlog.shift()!);
    return this;
  }

  get isPaused(): boolean {
    return this.pausedReads;
  }

  // --- driven by the network ---

  /** @internal Bytes (or the peer's FIN) arrive. */
  deliver(item: Buffer | 'end'): void {
    if (this.destroyed) return;
    if (this.pausedReads) {
      this.backlog.push(item);
      return;
    }
    if (item === 'end') {
      this.peerEnded = true;
      this.emit('end');
      this.maybeClose();
    } else {
      this.net.spend(CPU_COST.socketRead + item.length * CPU_COST.socketByte);
      this.emit('data', item);
    }
  }

  /** @internal Queues a chunk (or FIN) for the peer, due at `due` at the earliest. */
  send(item: Buffer | 'end', due: number): void {
    if (item !== 'end') this.inFlight += item.length;
    this.outQueue.push({ item, due });
    if (!this.pumping) {
      this.pumping = true;
      this.net.pump(this, this.outQueue, () => this.afterPump());
    }
  }

  /** @internal The peer read `bytes` we sent. */
  delivered(bytes: number): void {
    this.inFlight -= bytes;
    if (this.wantDrain && this.inFlight <= this.net.options.highWaterMark / 2 && !this.destroyed) {
      this.wantDrain = false;
      this.emit('drain');
    }
  }

  private afterPump(): void {
    this.pumping = false;
  }

  /** @internal The connection was reset (or its host died). */
  reset(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    const err = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
    this.emit('error', err);
    this.emit('close', true);
  }

  private maybeClose(): void {
    if (this.ended && this.peerEnded && !this.destroyed) {
      this.destroyed = true;
      this.net.forget(this);
      this.emit('close', false);
    }
  }
}

export interface SimListener {
  readonly host: string;
  readonly port: number;
  close(): void;
}

interface Listening {
  onConnection: (socket: SimSocket) => void;
}

export class SimNetwork {
  private readonly listeners = new Map<string, Listening>();
  private readonly faults = new Map<string, LinkFault>();
  /** Hosts whose machine vanished: nothing goes in or out, nobody is told. */
  private readonly vanished = new Set<string>();
  private readonly open = new Set<SimSocket>();
  /** Hosts whose process is stopped (SIGSTOP): bytes for them wait in the kernel. */
  private readonly paused = new Set<string>();
  private readonly hosts = new Set<string>();
  private nextPort = 40_000;

  constructor(
    private readonly sched: Scheduler,
    readonly options: NetworkOptions = DEFAULT_NETWORK,
  ) {}

  /** The running host's code did this much work (scheduler.ts, CPU_COST). */
  spend(ns: number): void {
    this.sched.spend(ns);
  }

  // --- faults ---

  /** Cuts `from` -> `to` (both directions unless `oneWay`). */
  partition(from: string, to: string, kind: LinkFault, oneWay = false): void {
    this.faults.set(`${from}>${to}`, kind);
    if (!oneWay) this.faults.set(`${to}>${from}`, kind);
    this.sched.note(`net: ${kind} ${from} ${oneWay ? '->' : '<->'} ${to}`);
    if (kind === 'reset') {
      for (const s of [...this.open]) {
        if ((s.host === from && hostOf(s.remoteAddress) === to) || (!oneWay && s.host === to && hostOf(s.remoteAddress) === from)) this.abort(s);
      }
    }
  }

  heal(from?: string, to?: string): void {
    if (from === undefined) this.faults.clear();
    else {
      this.faults.delete(`${from}>${to}`);
      this.faults.delete(`${to}>${from}`);
    }
    this.sched.note(`net: heal ${from ?? 'all'}${to === undefined ? '' : ` <-> ${to}`}`);
  }

  private fault(from: string, to: string): LinkFault | undefined {
    if (this.vanished.has(from) || this.vanished.has(to)) return 'drop';
    return this.faults.get(`${from}>${to}`);
  }

  /**
   * The process on `host` died: its listeners close, and each of its
   * connections is closed by the kernel (RST to the peer).
   */
  processDied(host: string): void {
    for (const key of [...this.listeners.keys()]) if (hostOf(key) === host) this.listeners.delete(key);
    for (const s of [...this.open]) if (s.host === host) this.abort(s, true);
  }


  /** The machine `host` is gone: nobody hears from it, and it hears nothing. */
  machineVanished(host: string): void {
    this.vanished.add(host);
    for (const key of [...this.listeners.keys()]) if (hostOf(key) === host) this.listeners.delete(key);
    // Its own sockets die with it; its peers learn nothing.
    for (const s of [...this.open]) if (s.host === host) this.forget(s);
  }

  machineBack(host: string): void {
    this.vanished.delete(host);
  }

  /** The process on `host` is stopped: nothing is delivered to it until it resumes. */
  pauseHost(host: string): void {
    this.paused.add(host);
  }

  resumeHost(host: string): void {
    this.paused.delete(host);
  }

  /** Bytes `from` sends now reach `to` (no cut or black hole on the way, `from` neither paused nor vanished). */
  reaches(from: string, to: string): boolean {
    return this.fault(from, to) === undefined && !this.paused.has(from);
  }

  /** A partition (a cut or a black hole) lies between `from` and `to`: what a pause does not make. */
  cut(from: string, to: string): boolean {
    return this.fault(from, to) !== undefined;
  }

  /** Every host that has listened or connected so far. */
  hostsSeen(): string[] {
    return [...this.hosts].sort();
  }

  // --- the transport ---

  listen(host: string, port: number, onConnection: (socket: SimSocket) => void): SimListener {
    const key = `${host}:${port}`;
    this.hosts.add(host);
    if (this.listeners.has(key)) throw Object.assign(new Error(`listen EADDRINUSE ${key}`), { code: 'EADDRINUSE' });
    this.listeners.set(key, { onConnection });
    return {
      host,
      port,
      close: () => {
        if (this.listeners.get(key)?.onConnection === onConnection) this.listeners.delete(key);
      },
    };
  }

  /**
   * Opens a connection from `fromHost`; the returned socket emits 'connect'
   * or 'error' (ECONNREFUSED) later, or nothing at all into a black hole.
   */
  connect(fromHost: string, toHost: string, port: number): SimSocket {
    const local = { address: fromHost, port: this.nextPort++ };
    this.hosts.add(fromHost);
    const client = new SimSocket(this, fromHost, local, { address: toHost, port });
    const there = this.latency();
    // Each event runs the code of the host it reaches (its CPU: scheduler.ts).
    this.sched.after(there, `net: SYN ${fromHost} -> ${toHost}:${port}`, () => {
      if (client.destroyed) return;
      const fault = this.fault(fromHost, toHost);
      if (fault === 'drop') return; // the SYN vanished: only the caller's timeout ends this
      const listening = this.listeners.get(`${toHost}:${port}`);
      if (fault === 'reset' || listening === undefined) {
        this.sched.after(this.latency(), `net: refused ${fromHost} -> ${toHost}:${port}`, () => {
          if (client.destroyed) return;
          client.destroyed = true;
          client.emit('error', Object.assign(new Error(`connect ECONNREFUSED ${toHost}:${port}`), { code: 'ECONNREFUSED' }));
          client.emit('close', true);
        }, fromHost);
        return;
      }
      const server = new SimSocket(this, toHost, { address: toHost, port }, local);
      server.peer = client;
      client.peer = server;
      this.open.add(client);
      this.open.add(server);
      listening.onConnection(server);
      this.sched.after(this.latency(), `net: connected ${fromHost} -> ${toHost}:${port}`, () => {
        if (this.fault(toHost, fromHost) === 'drop') return; // SYN-ACK lost: the client never hears
        if (!client.destroyed) client.emit('connect');
      }, fromHost);
    }, toHost);
    return client;
  }

  private latency(): number {
    const { minLatency, maxLatency } = this.options;
    return minLatency + this.sched.random() * (maxLatency - minLatency);
  }

  /** @internal Cuts a write into random chunks, each with its own latency, kept in order. */
  transmit(from: SimSocket, buf: Buffer): void {
    if (from.peer === undefined) return;
    for (let off = 0; off < buf.length; ) {
      const n = Math.min(buf.length - off, 1 + Math.floor(this.sched.random() * this.options.maxChunk));
      from.send(Buffer.from(buf.subarray(off, off + n)), this.sched.now + this.latency());
      off += n;
    }
  }

  /** @internal */
  transmitEnd(from: SimSocket): void {
    if (from.peer !== undefined) from.send('end', this.sched.now + this.latency());
  }

  /**
   * @internal Delivers `queue`'s head when it is due and the path is open;
   * through a black hole it waits and retries (TCP retransmits), so a healed
   * path resumes the stream in order.
   */
  pump(from: SimSocket, queue: Array<{ item: Buffer | 'end'; due: number }>, done: () => void): void {
    const step = () => {
      const to = from.peer;
      const head = queue[0];
      if (head === undefined || to === undefined || from.destroyed && head.item !== 'end') {
        queue.length = 0;
        return done();
      }
      if (head.due > this.sched.now) {
        this.sched.after(head.due - this.sched.now, `net: ${describe(head.item)} ${from.host} -> ${to.host}`, step, to.host);
        return;
      }
      if (this.fault(from.host, to.host) === 'drop') {
        this.sched.after(RETRANSMIT_MS, `net: retransmit ${from.host} -> ${to.host}`, step, to.host);
        return;
      }
      if (this.paused.has(to.host)) {
        this.sched.after(RETRANSMIT_MS / 4, `net: ${to.host} is stopped`, step, to.host);
        return;
      }
      queue.shift();
      if (to.destroyed) {
        // The other end is gone (its process died, or it closed): its kernel answers with a reset.
        queue.length = 0;
        this.sched.after(this.latency(), `net: RST ${to.host} -> ${from.host} (no such connection)`, () => {
          if (this.fault(to.host, from.host) === 'drop') return;
          this.forget(from);
          from.reset();
        }, from.host);
        return done();
      }
      if (head.item !== 'end') from.delivered(head.item.length);
      to.deliver(head.item);
      step();
    };
    step();
  }

  /** @internal `s` is closed abruptly: its peer gets a reset (unless the path drops it). */
  abort(s: SimSocket, processDead = false): void {
    const peer = s.peer;
    this.forget(s);
    if (processDead) s.destroyed = true; // nobody is left to hear about it
    if (peer === undefined || peer.destroyed) return;
    this.sched.after(this.latency(), `net: RST ${s.host} -> ${peer.host}`, () => {
      if (this.fault(s.host, peer.host) === 'drop') return;
      this.forget(peer);
      peer.reset();
    }, peer.host);
  }

  /** @internal */
  forget(s: SimSocket): void {
    this.open.delete(s);
  }

  /** Connections open now (both ends count). */
  get openSockets(): number {
    return this.open.size;
  }
}

function hostOf(address: string): string {
  const i = address.lastIndexOf(':');
  return i < 0 ? address : address.slice(0, i);
}
