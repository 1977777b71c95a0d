/**
 * A raw protocol client on a simulated host: it pipelines requests on one
 * connection, matches replies by (op, key) as PROTOCOL.md says, and records
 * every operation in the checker's history format with the simulation's
 * global time (the perfect observer). Whatever it cannot know (the
 * connection broke, M or E ended it, it half-closed with the request still
 * unanswered) is recorded as `unknown`, never guessed.
 */
import type { Operation } from '@ticketing/checker';
import { LineFramer, parseReply, WireError, type Reply } from '@ticketing/protocol';
import type { Scheduler } from './scheduler.js';
import type { SimNetwork, SimSocket } from './sim-network.js';

/** The largest clock rate error the simulation gives a node (docs/raft.md states the assumption). */
export const LEASE_CLOCK_RATE_ERROR = 0.011;

interface Pending {
  readonly kind: 'A' | 'R' | 'X' | 'P';
  readonly key: string;
  readonly invokedAt: number;
  readonly waitMs: number;
  readonly leaseMs: number;
  readonly token: bigint;
  readonly done: (outcome: Outcome) => void;
}

export type Outcome =
  | { readonly kind: 'granted'; readonly token: bigint }
  | { readonly kind: 'timeout' | 'busy' | 'released' | 'not-held' | 'extended' | 'not-extended' | 'pong' }
  | { readonly kind: 'unknown'; readonly why: string };

export interface WireConnectionEvents {
  /** `M <address>` ended the connection. */
  redirected?(address: string | undefined): void;
  /** The connection is over, for whatever reason. */
  closed?(): void;
}

/** One client connection. */
export class WireConnection {
  private readonly socket: SimSocket;
  private readonly framer = new LineFramer();
  /** Unanswered requests by "op key", oldest first. */
  private readonly pending = new Map<string, Pending[]>();
  private connected = false;
  private closed = false;
  private halfClosed = false;
  private queuedBeforeConnect = '';

  constructor(
    private readonly sched: Scheduler,
    net: SimNetwork,
    readonly host: string,
    readonly target: string,
    private readonly history: Operation[],
    readonly clientId: string,
    private readonly events: WireConnectionEvents = {},
    /** Where releases and extensions wait while unanswered, as unknown operations (workload.ts's holds). */
    private readonly unsettled?: Set<Operation>,
    /** The client token its first line `H 1 <token>` carries (none: no H; the nodes ask for none). */
    token?: string,
  ) {
    if (token !== undefined) this.queuedBeforeConnect = `H 1 ${token}\n`;
    const i = target.lastIndexOf(':');
    this.socket = net.connect(host, target.slice(0, i), Number(target.slice(i + 1)));
    this.socket.on('connect', () => {
      this.connected = true;
      if (this.queuedBeforeConnect !== '') this.socket.write(this.queuedBeforeConnect);
      this.queuedBeforeConnect = '';
      if (this.halfClosed) this.socket.end();
    });
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    this.socket.on('error', () => {});
    this.socket.on('close', () => this.onClose());
    this.socket.on('end', () => {
      // The server closed its side: nothing more will come.
      if (!this.halfClosed) this.socket.end();
    });
  }

  get isOpen(): boolean {
    return !this.closed && !this.halfClosed;
  }

  get unanswered(): number {
    let n = 0;
    for (const list of this.pending.values()) n += list.length;
    return n;
  }

  acquire(key: string, waitSeconds: number, leaseSeconds: number, done: (o: Outcome) => void = () => {}): void {
    const invokedAt = this.sched.now;
    const finish = (o: Outcome) => {
      // What the server promises in real time: its lease is counted on its own clock, whose rate may
      // be off by LEASE_CLOCK_RATE_ERROR (docs/raft.md), so a lease can end that much early.
      const leaseMs = leaseSeconds * 1000 * (1 - LEASE_CLOCK_RATE_ERROR);
      const base = { client: this.clientId, key, invokedAt, waitMs: waitSeconds * 1000, leaseMs, op: 'acquire' as const };
      if (o.kind === 'granted') this.history.push({ ...base, completedAt: this.sched.now, outcome: 'granted', token: o.token });
      else if (o.kind === 'timeout' || o.kind === 'busy') this.history.push({ ...base, completedAt: this.sched.now, outcome: o.kind });
      else this.history.push({ ...base, completedAt: undefined, outcome: 'unknown' });
      done(o);
    };
    this.send(`A ${key} ${waitSeconds} ${leaseSeconds}\n`, { kind: 'A', key, invokedAt, waitMs: waitSeconds * 1000, leaseMs: leaseSeconds * 1000, token: 0n, done: finish });
  }

  release(key: string, token: bigint, done: (o: Outcome) => void = () => {}): void {
    const invokedAt = this.sched.now;
    const base = { client: this.clientId, key, invokedAt, token, op: 'release' as const };
    const waiting = this.await({ ...base, completedAt: undefined, outcome: 'unknown' });
    const finish = (o: Outcome) => {
      waiting();
      if (o.kind === 'released' || o.kind === 'not-held') this.history.push({ ...base, completedAt: this.sched.now, outcome: o.kind });
      else this.history.push({ ...base, completedAt: undefined, outcome: 'unknown' });
      done(o);
    };
    this.send(`R ${key} ${token}\n`, { kind: 'R', key, invokedAt, waitMs: 0, leaseMs: 0, token, done: finish });
  }

  /** `X key token lease`: recorded with the lease the server promises in real time, as an acquire's. */
  extend(key: string, token: bigint, leaseSeconds: number, done: (o: Outcome) => void = () => {}): void {
    const invokedAt = this.sched.now;
    const base = { client: this.clientId, key, invokedAt, token, leaseMs: leaseSeconds * 1000 * (1 - LEASE_CLOCK_RATE_ERROR), op: 'extend' as const };
    const waiting = this.await({ ...base, completedAt: undefined, outcome: 'unknown' });
    const finish = (o: Outcome) => {
      waiting();
      if (o.kind === 'extended' || o.kind === 'not-extended') this.history.push({ ...base, completedAt: this.sched.now, outcome: o.kind });
      else this.history.push({ ...base, completedAt: undefined, outcome: 'unknown' });
      done(o);
    };
    this.send(`X ${key} ${token} ${leaseSeconds}\n`, { kind: 'X', key, invokedAt, waitMs: 0, leaseMs: leaseSeconds * 1000, token, done: finish });
  }

  /** Puts `op` among the unsettled ones until the returned function takes it out (its answer came). */
  private await(op: Operation): () => void {
    this.unsettled?.add(op);
    return () => this.unsettled?.delete(op);
  }

  ping(done: (o: Outcome) => void = () => {}): void {
    this.send('P\n', { kind: 'P', key: '', invokedAt: this.sched.now, waitMs: 0, leaseMs: 0, token: 0n, done });
  }

  /** FIN: the server drops our waiting acquires, and still writes what it decided. */
  halfClose(): void {
    if (this.halfClosed || this.closed) return;
    this.halfClosed = true;
    if (this.connected) this.socket.end();
  }

  /** RST: we stop reading at once. */
  reset(): void {
    if (this.closed) return;
    this.socket.destroy();
    this.onClose();
  }

  private send(line: string, p: Pending): void {
    if (this.closed || this.halfClosed) {
      p.done({ kind: 'unknown', why: 'connection closed before the request was sent' });
      return;
    }
    const id = `${p.kind} ${p.key}`;
    const list = this.pending.get(id);
    if (list === undefined) this.pending.set(id, [p]);
    else list.push(p);
    if (this.connected) this.socket.write(line);
    else this.queuedBeforeConnect += line;
  }

  private onData(chunk: Buffer): void {
    if (this.closed) return;
    const r = this.framer.push(chunk, (buf, s, e) => this.onLine(parseReply(buf, s, e)));
    if (r === 'toolong') this.fatal('reply too long');
  }

  private onLine(reply: Reply | WireError): boolean {
    if (reply instanceof WireError) return this.fatal(`malformed reply: ${reply.text}`);
    switch (reply.op) {
      case 'A':
        return this.answer('A', reply.key, { kind: 'granted', token: reply.token });
      case 'T':
        return this.answer('A', reply.key, { kind: 'timeout' });
      case 'B':
        return this.answer('A', reply.key, { kind: 'busy' });
      case 'R':
        return this.answer('R', reply.key, { kind: 'released' });
      case 'N':
        return this.answer('R', reply.key, { kind: 'not-held' });
      case 'P':
        return this.answer('P', '', { kind: 'pong' });
      case 'H':
        return true;
      case 'X':
        return this.answer('X', reply.key, { kind: 'extended' });
      case 'G':
        return this.answer('X', reply.key, { kind: 'not-extended' });
      case 'M':
        this.events.redirected?.(reply.address);
        return this.fatal(`redirected to ${reply.address ?? '-'}`);
      case 'E':
        return this.fatal(`E ${reply.code} ${reply.text}`);
    }
  }

  private answer(kind: Pending['kind'], key: string, outcome: Outcome): boolean {
    const list = this.pending.get(`${kind} ${key}`);
    const p = list?.shift();
    if (p === undefined) return this.fatal(`a reply that matches no request: ${kind} ${key}`);
    if (list!.length === 0) this.pending.delete(`${kind} ${key}`);
    p.done(outcome);
    return true;
  }

  private fatal(why: string): false {
    this.sched.note(`${this.clientId}: connection to ${this.target} ends: ${why}`);
    this.reset();
    return false;
  }

  private onClose(): void {
    if (this.closed) return;
    this.closed = true;
    const all = [...this.pending.values()].flat().sort((a, b) => a.invokedAt - b.invokedAt);
    this.pending.clear();
    for (const p of all) p.done({ kind: 'unknown', why: 'connection closed with the request unanswered' });
    this.events.closed?.();
  }
}
