/**
 * One connection to one address: the `H` handshake, pipelined requests
 * matched to replies by (op, key) in send order, idle pings, and every rule
 * that makes a connection session-fatal (PROTOCOL.md, CLIENT.md).
 *
 * Its state is a closed union, changed only in `setState`/`finish`. It never
 * retries anything itself: outcomes go to whoever sent the request.
 */

import { LineFramer, WireError, parseReply, type Reply } from '@ticketing/protocol';
import { AuthError, PermissionError, ProtocolError } from './errors.js';
import { defer, every, now, timing, type Timer } from './timing.js';
import type { ClientSocket, Transport } from './transport.js';

export type State =
  | { readonly kind: 'connecting' }
  /** `H` sent, its reply not yet in. */
  | { readonly kind: 'greeting' }
  /** `since`: when the `H` reply came (monotonic ms). */
  | { readonly kind: 'ready'; readonly nodeName: string; readonly since: number }
  /** We sent FIN (an acquire was aborted); reading until the server closes. */
  | { readonly kind: 'draining' }
  | { readonly kind: 'closed'; readonly end: End };

/** Why a connection ended. */
export type End =
  /** The server closed cleanly after our FIN: acquires still unanswered were dropped, not granted. */
  | { readonly kind: 'drained' }
  /** `M`: not the active node; `address` undefined for `M -`. */
  | { readonly kind: 'redirect'; readonly address: string | undefined }
  /** Broken, `E`, protocol violation, silence. */
  | { readonly kind: 'failed'; readonly error: Error }
  /** Closed by the broker. */
  | { readonly kind: 'shutdown' };

/** What became of a request. */
export type Outcome =
  | { readonly kind: 'reply'; readonly reply: Reply }
  /** Not answered, and the server said it was not granted (see `notGranted`). Only for `A`. */
  | { readonly kind: 'dropped' }
  /** Never written: the connection ended (or its write failed at once) before the bytes left. */
  | { readonly kind: 'unsent' }
  /** Not answered; it may or may not have taken effect. */
  | { readonly kind: 'lost'; readonly error: Error };

export interface Pending {
  readonly op: 'A' | 'R' | 'X' | 'P';
  readonly key: string;
  /** The request line, `\n` included. */
  readonly line: string;
  /** `A`: its wait in ms (0 for other ops). */
  readonly waitMs: number;
  /**
   * When the write was issued (monotonic ms): the start of the conservative
   * lease. Set when the request is written (at the end of the event-loop turn
   * it was made in), read just before the bytes are handed to the socket, so
   * a lease counted from it is never longer than the server's.
   */
  sentAt: number;
  /**
   * `A`: when its reply can come at the latest, give or take the grace:
   * its wait's end, moved later to when the earlier same-key acquire on this
   * connection was answered (the server writes same-key replies in order).
   * Never while it is not written.
   */
  dueAt: number;
  /** The bytes were handed to the socket (until then the request can be taken back, and has no effect). */
  written: boolean;
  /** Told the outcome, once. */
  readonly owner: RequestOwner;
  /** The next unanswered request of the same (op, key) on this connection (see Queue). */
  next: Pending | undefined;
  /** On the oldest of its (op, key): the newest one. */
  last: Pending | undefined;
}

/** Whoever sent a request: told what became of it. */
export interface RequestOwner {
  settled(p: Pending, outcome: Outcome, conn: Connection): void;
}

/**
 * A connection's unanswered requests of one op, by key, each key's oldest
 * first (a list through `next`): a reply is matched by its op and key
 * (PROTOCOL.md: replies to one (op, key) come in request order).
 */
class Queue {
  private readonly heads = new Map<string, Pending>();

  get empty(): boolean {
    return this.heads.size === 0;
  }

  push(p: Pending): void {
    const head = this.heads.get(p.key);
    if (head === undefined) {
      p.last = p;
      this.heads.set(p.key, p);
    } else {
      head.last!.next = p;
      head.last = p;
    }
  }

  /** The oldest unanswered request of `key`, if any. */
  first(key: string): Pending | undefined {
    return this.heads.get(key);
  }

  /** Takes out the oldest unanswered request of `key`. */
  shift(key: string): Pending | undefined {
    const head = this.heads.get(key);
    if (head === undefined) return undefined;
    const next = head.next;
    if (next === undefined) {
      this.heads.delete(key);
    } else {
      next.last = head.last;
      this.heads.set(key, next);
    }
    head.next = head.last = undefined;
    return head;
  }

  /** Takes out `p` wherever it is in its key's list. */
  remove(p: Pending): void {
    if (this.first(p.key) === p) {
      this.shift(p.key);
      return;
    }
    for (let q = this.first(p.key); q !== undefined; q = q.next) {
      if (q.next !== p) continue;
      q.next = p.next;
      const head = this.first(p.key)!;
      if (head.last === p) head.last = q;
      p.next = undefined;
      return;
    }
  }

  /** The oldest unanswered request of each key. */
  oldest(): IterableIterator<Pending> {
    return this.heads.values();
  }

  *[Symbol.iterator](): Generator<Pending> {
    for (const head of this.heads.values()) for (let p: Pending | undefined = head; p !== undefined; p = p.next) yield p;
  }

  clear(): void {
    this.heads.clear();
  }
}

/** A single write up to this size on an idle socket fails whole or not at all (one system call). */
const ATOMIC_WRITE_BYTES = 16 * 1024;

export interface ConnectionEvents {
  ready(conn: Connection): void;
  /** A suspect connection heard from its server again: it may be picked (waitReady can settle). */
  answered(conn: Connection): void;
  closed(conn: Connection, end: End): void;
}

/** The owner of idle and busy pings: their pong only counts as data received. */
const pingOwner: RequestOwner = { settled: () => {} };

export class Connection {
  private state: State = { kind: 'connecting' };
  private readonly socket: ClientSocket;
  private readonly framer = new LineFramer();
  /** Unanswered requests, by op. */
  private readonly queues: Readonly<Record<Pending['op'], Queue>> = { A: new Queue(), R: new Queue(), X: new Queue(), P: new Queue() };
  private openedAt = now();
  private lastDataAt = now();
  private pingSentAt: number | undefined;
  /** See `suspect`. */
  private suspected = false;
  /** How long the ping in flight may go unanswered (idle and busy pings differ). */
  private pongWithinMs = timing.pongTimeoutMs;
  /** After our FIN: the server answered the `P` sent with it (so its close is a drain, not a crash). */
  private drainPonged = false;
  private lastTickAt = now();
  /** A deadline verdict waiting for the I/O that is ready to be read first. */
  private verdictDeferred = false;
  private socketError: Error | undefined;
  private readonly ticker: Timer;
  /**
   * Requests not written yet, oldest first: everything asked of this
   * connection in one event-loop turn goes out in one write at its end (after
   * the replies that were ready to be read), and until then can be taken back.
   */
  private unsent: Pending[] = [];
  private flushQueued = false;
  private readonly flushAtEndOfTurn = (): void => {
    this.flushQueued = false;
    this.flush();
  };

  /** Writes every unsent request now, in one write. */
  private flush(): void {
    const batch = this.unsent;
    if (batch.length === 0 || this.state.kind === 'closed') return;
    this.unsent = [];
    const sentAt = now();
    let data = '';
    for (const p of batch) {
      data += p.line;
      p.sentAt = sentAt;
      p.dueAt = sentAt + p.waitMs;
      p.written = true;
    }
    const idle = (this.socket.writableLength ?? 0) === 0;
    this.socket.write(data);
    // A write that failed at once (the peer had reset the connection) on an idle socket, and small
    // enough for one system call, sent nothing: those requests may go out on another connection.
    if (this.socket.errored != null && idle && data.length <= ATOMIC_WRITE_BYTES) {
      for (const p of batch) p.written = false;
    }
  }

  constructor(
    readonly address: string,
    transport: Transport,
    private readonly helloLine: string,
    private readonly events: ConnectionEvents,
  ) {
    this.socket = transport.open(address, () => this.onConnected());
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    this.socket.on('end', () => this.onEnd());
    this.socket.on('close', () => this.finish({ kind: 'failed', error: this.socketError ?? new Error(`connection to ${address} closed`) }));
    this.socket.on('error', (err) => (this.socketError ??= err));
    this.ticker = every(timing.tickMs, () => this.tick());
  }

  /** Ready, and the socket still takes bytes: a request written now may reach the server. */
  get usable(): boolean {
    return this.state.kind === 'ready' && this.socket.writable && !this.socket.destroyed;
  }

  /**
   * Another connection to the same server went silent, and this one has not
   * heard from it since: likely silent too (a stopped or frozen process).
   * Pinged now, with the busy ping's short pong deadline; the pool sends
   * requests elsewhere until it hears from the server again.
   */
  get suspect(): boolean {
    return this.suspected;
  }

  /** A connection to the same server as this one went silent: check this one at once (see `suspect`). */
  siblingWentSilent(): void {
    if (this.state.kind !== 'ready') return;
    const t = now();
    this.suspected = true;
    if (this.pingSentAt !== undefined) {
      // A ping already in flight: its deadline becomes the short one too.
      this.pongWithinMs = Math.min(this.pongWithinMs, t - this.pingSentAt + timing.busyPongTimeoutMs);
      return;
    }
    this.ping(t, timing.busyPongTimeoutMs);
    this.flush();
  }

  /**
   * Another connection to the same server went silent, and this one was only
   * redirected here: closed at once, so its slot dials its own address (whose
   * node may be taking over) instead of waiting for a pong that likely never
   * comes. Returns false, changing nothing, while an acquire or extension
   * waits on it (closing would make its outcome unknown): it is checked as
   * a suspect instead. Releases are re-sent elsewhere, as on any close.
   */
  leaveForSilentSibling(): boolean {
    if (this.state.kind !== 'ready') return false;
    if (!this.queues.A.empty || !this.queues.X.empty) return false;
    this.fail(new Error(`${this.address}: another connection to it went silent`));
    return true;
  }

  /** It died of silence (no pong in time), not of one queue's overdue reply, a reset, a close or an error reply. */
  diedSilent = false;

  /** The state's name, for `broker.state`. */
  get stateKind(): State['kind'] {
    return this.state.kind;
  }

  /**
   * The node name from the `H` reply, kept after the connection ends: a `T`
   * and the `M` right behind it arrive together, and the early-`T` re-send
   * must still know which node stepped down.
   */
  get nodeName(): string | undefined {
    return this.helloName;
  }

  private helloName: string | undefined;

  /** When the connection became usable (monotonic ms). */
  get readySince(): number | undefined {
    return this.state.kind === 'ready' ? this.state.since : undefined;
  }

  /**
   * Queues a request for the write at the end of this turn; the caller
   * checked `usable`. `waitSeconds` is the acquire's wait (0 for other ops).
   */
  send(op: Pending['op'], key: string, line: string, waitSeconds: number, owner: RequestOwner): Pending {
    const p: Pending = { op, key, line, waitMs: waitSeconds * 1000, sentAt: NaN, dueAt: Infinity, written: false, owner, next: undefined, last: undefined };
    this.queues[op].push(p);
    this.unsent.push(p);
    if (!this.flushQueued) {
      this.flushQueued = true;
      defer(this.flushAtEndOfTurn);
    }
    return p;
  }

  /**
   * Takes back a request not written yet (cancelled in the turn it was made):
   * true if it never left, so nothing reached the server and it has no outcome.
   */
  unsend(p: Pending): boolean {
    const i = this.unsent.indexOf(p);
    if (i < 0 || this.state.kind === 'closed') return false;
    this.unsent.splice(i, 1);
    this.queues[p.op].remove(p);
    return true;
  }

  /** Every unanswered request: acquires, releases, extensions, pings. */
  private all(): Pending[] {
    return [...this.queues.A, ...this.queues.R, ...this.queues.X, ...this.queues.P];
  }

  /** The acquires on it not answered yet (close() aborts them). */
  acquiresInFlight(): Pending[] {
    return [...this.queues.A];
  }

  /** Draining after our FIN: the server has not closed yet. */
  get draining(): boolean {
    return this.state.kind === 'draining';
  }

  /**
   * Half-close (FIN): the server drops this connection's waiting acquires,
   * writes what it already decided, then closes. Used when an acquire is aborted.
   */
  halfClose(): void {
    if (this.state.kind === 'closed' || this.state.kind === 'draining') return;
    this.setState({ kind: 'draining' });
    this.lastDataAt = now(); // the server gets a fresh grace period to answer and close
    // A `P` right before the FIN: a server that drains answers it before it closes; a crashed one
    // (its kernel sends a FIN too) does not, and then nothing unanswered is known to be dropped.
    this.send('P', '', 'P\n', 0, { settled: (_p, outcome) => (this.drainPonged = outcome.kind === 'reply') });
    this.flush();
    this.socket.end();
  }

  /** Closes at once; unanswered requests are lost. */
  shutdown(): void {
    this.finish({ kind: 'shutdown' });
  }

  /** The `H` reply came at some point (the connection was usable). */
  wasReady = false;

  private setState(state: State): void {
    if (state.kind === 'ready') this.wasReady = true;
    this.state = state;
  }

  private onConnected(): void {
    if (this.state.kind !== 'connecting') return;
    this.setState({ kind: 'greeting' });
    this.lastDataAt = now();
    this.socket.write(this.helloLine);
  }

  private onData(chunk: Buffer): void {
    if (this.state.kind === 'closed') return;
    this.lastDataAt = now();
    if (this.suspected) {
      this.suspected = false;
      this.events.answered(this);
    }
    if (this.framer.push(chunk, this.onLine) === 'toolong') {
      this.fail(new ProtocolError(`${this.address} sent a reply longer than 512 bytes`));
    }
  }

  private readonly onLine = (buf: Buffer, start: number, end: number): boolean => {
    const reply = parseReply(buf, start, end);
    if (reply instanceof WireError) {
      this.fail(new ProtocolError(`${this.address} sent a bad reply (${reply.text}): ${excerpt(buf, start, end)}`));
    } else {
      this.onReply(reply, buf, start, end);
    }
    return this.state.kind !== 'closed';
  };

  private onReply(reply: Reply, buf: Buffer, start: number, end: number): void {
    switch (reply.op) {
      case 'H':
        if (this.state.kind !== 'greeting') break;
        this.helloName = reply.nodeName;
        this.setState({ kind: 'ready', nodeName: reply.nodeName, since: now() });
        this.events.ready(this);
        return;
      case 'M':
        this.finish({ kind: 'redirect', address: reply.address });
        return;
      case 'E': {
        const text = `${this.address} closed the session: E ${reply.code} ${reply.text}`.trimEnd();
        this.fail(reply.code === 'auth' ? new AuthError(text) : reply.code === 'perm' ? this.permError(text) : new ProtocolError(text, undefined, reply.code));
        return;
      }
      case 'P':
        if (this.answer('P', '', reply)) {
          this.pingSentAt = undefined;
          return;
        }
        break;
      case 'A':
      case 'T':
      case 'B':
        if (this.answer('A', reply.key, reply)) return;
        break;
      case 'R':
      case 'N':
        if (this.answer('R', reply.key, reply)) return;
        break;
      case 'X':
      case 'G':
        if (this.answer('X', reply.key, reply)) return;
        break;
    }
    this.fail(new ProtocolError(`${this.address} sent a reply that matches no request: ${excerpt(buf, start, end)}`));
  }

  /**
   * `E perm` names no key: it is the answer of the one request still
   * unanswered, if there is exactly one (then `PermissionError`: refused,
   * nothing granted). With several, the refused one cannot be told apart and
   * another acquire may have been granted just before, so it is a plain
   * session error: unanswered acquires become indeterminate, releases are
   * retried. A request not written yet counts too (it only makes the outcome
   * more cautious); pings do not.
   */
  private permError(text: string): Error {
    const asked = [...this.queues.A, ...this.queues.R, ...this.queues.X];
    if (asked.length === 1 && asked[0]!.written) return new PermissionError(text);
    const unanswered = asked.length;
    return new ProtocolError(`${text} (${unanswered} requests were unanswered, so the refused one is unknown)`, undefined, 'perm');
  }

  /** Settles the oldest unanswered request of (op, key) with `reply`; false if there is none. */
  private answer(op: Pending['op'], key: string, reply: Reply): boolean {
    const queue = this.queues[op];
    const p = queue.shift(key);
    if (p === undefined) return false;
    // The next same-key acquire's reply is written after this one: its reply is due from now at the earliest.
    const next = op === 'A' ? queue.first(key) : undefined;
    if (next !== undefined) next.dueAt = Math.max(next.dueAt, now());
    p.owner.settled(p, { kind: 'reply', reply }, this);
    return true;
  }

  private onEnd(): void {
    // After our FIN, a clean close that followed the pong means the server dropped what it had not decided.
    if (this.state.kind === 'draining' && this.drainPonged) this.finish({ kind: 'drained' });
    else if (this.state.kind === 'draining') this.fail(new Error(`${this.address} closed after our FIN without answering the P sent with it (crashed?)`));
    else this.fail(new Error(`${this.address} closed the connection`));
  }

  private fail(error: Error): void {
    this.finish({ kind: 'failed', error });
  }

  /** The one way out: every unanswered request gets its outcome, then the owner hears of it. */
  private finish(end: End): void {
    if (this.state.kind === 'closed') return;
    this.setState({ kind: 'closed', end });
    this.ticker.cancel();
    this.unsent = [];
    this.socket.destroy();
    const lost: Outcome =
      end.kind === 'failed'
        ? { kind: 'lost', error: end.error }
        : { kind: 'lost', error: new Error(end.kind === 'redirect' ? `${this.address} redirected (M ${end.address ?? '-'})` : `connection to ${this.address} closed`) };
    const unanswered = this.all();
    for (const queue of Object.values(this.queues)) queue.clear();
    for (const p of unanswered) p.owner.settled(p, !p.written ? { kind: 'unsent' } : p.op === 'A' && notGranted(end) ? { kind: 'dropped' } : lost, this);
    this.events.closed(this, end);
  }

  /**
   * Deadlines: handshake, pings, pong, overdue replies, a server that does not
   * close after our FIN. A tick that comes long after the one before means the
   * process was paused (a VM freeze, SIGSTOP, a blocked event loop): every
   * deadline is moved on by the gap instead of expiring, since the replies
   * that came meanwhile are not read yet. A deadline that has passed is only
   * a verdict once the I/O that is ready now has been read.
   */
  private tick(): void {
    const t = now();
    const gap = t - this.lastTickAt;
    this.lastTickAt = t;
    if (gap > timing.tickMs + timing.pauseGapMs) {
      this.rearm(gap);
      return;
    }
    if (this.verdictDeferred || this.overdue(t) === undefined) {
      this.pingIfQuiet(t);
      return;
    }
    this.verdictDeferred = true;
    defer(() => {
      this.verdictDeferred = false;
      const t = now();
      const why = this.overdue(t);
      if (why === undefined) return;
      // Silent: not even a pong. (An overdue acquire alone is one queue's silence: the server may be
      // answering everything else.)
      this.diedSilent = this.state.kind === 'ready' && this.pongOverdue(t);
      this.fail(new Error(`${this.address}: ${why}`));
    });
  }

  /** Moves every deadline `ms` later (the process was paused for about that long). */
  private rearm(ms: number): void {
    this.openedAt += ms;
    this.lastDataAt += ms;
    if (this.pingSentAt !== undefined) this.pingSentAt += ms;
    for (const p of this.all()) p.dueAt += ms;
  }

  /** Why the connection counts as dead at `t`, if it does. */
  private overdue(t: number): string | undefined {
    switch (this.state.kind) {
      case 'connecting':
      case 'greeting':
        return t - this.openedAt >= timing.handshakeMs ? `no hello reply within ${timing.handshakeMs} ms` : undefined;
      case 'draining':
        return t - this.lastDataAt >= timing.replyGraceMs ? `did not close within ${timing.replyGraceMs} ms of our FIN` : undefined;
      case 'ready':
        if (this.pongOverdue(t)) return `no pong within ${this.pongWithinMs} ms`;
        return this.overdueAcquire(t) ? `no reply to an acquire ${timing.replyGraceMs} ms after it could have come` : undefined;
      case 'closed':
        return undefined;
    }
  }

  /**
   * Pings a quiet connection: after idlePingMs, or after busyPingMs while a
   * request is outstanding (a hung server is then found within about 2 s).
   */
  private pingIfQuiet(t: number): void {
    if (this.state.kind !== 'ready') return;
    const busy = !this.queues.A.empty || !this.queues.R.empty || !this.queues.X.empty;
    if (this.pingSentAt !== undefined) {
      // An idle ping in flight when requests come to wait on it: its pong is due by the busy deadline
      // from now (a hung server still shows in about 2 s, not in what is left of the idle one).
      if (busy) this.pongWithinMs = Math.min(this.pongWithinMs, t - this.pingSentAt + timing.busyPongTimeoutMs);
      return;
    }
    const quietFor = t - this.lastDataAt;
    if (quietFor < (busy ? timing.busyPingMs : timing.idlePingMs)) return;
    this.ping(t, busy ? timing.busyPongTimeoutMs : timing.pongTimeoutMs);
  }

  /** Sends a `P` that must be answered within `pongWithinMs`. */
  private ping(t: number, pongWithinMs: number): void {
    this.pingSentAt = t;
    this.pongWithinMs = pongWithinMs;
    this.send('P', '', 'P\n', 0, pingOwner);
  }

  /** The ping in flight has gone unanswered past its deadline. */
  private pongOverdue(t: number): boolean {
    return this.pingSentAt !== undefined && t - this.pingSentAt >= this.pongWithinMs;
  }

  /**
   * "Silent" is judged per (op,key) queue (CLIENT.md), whatever other traffic
   * the connection carries: only the oldest acquire of a key can be overdue,
   * since every later one's reply comes after it.
   */
  private overdueAcquire(t: number): boolean {
    for (const head of this.queues.A.oldest()) if (t >= head.dueAt + timing.replyGraceMs) return true;
    return false;
  }
}

/**
 * Ends after which an unanswered acquire was certainly not granted
 * (PROTOCOL.md): after our FIN the server drops its waiters and closes
 * cleanly. Every other end leaves the outcome unknown, `M` included (seed
 * 003): a Raft leader that loses leadership drops replies it has not
 * committed, and the next leader may still commit that grant.
 */
function notGranted(end: End): boolean {
  return end.kind === 'drained';
}

/** A short printable excerpt of a reply line for error messages. */
function excerpt(buf: Buffer, start: number, end: number): string {
  const text = buf.toString('utf8', start, Math.min(end, start + 60));
  return JSON.stringify(end - start > 60 ? `${text}...` : text);
}
