/**
 * One client connection: the socket adapted to the protocol. Framing, the
 * optional `H` handshake, dispatch of requests to the engine, back-pressure,
 * idle and line timeouts, and `E` then close. Reply order, batching and the
 * Raft commit gate are the reply queue's (reply-queue.ts).
 */
import { LineFramer, WireError, formatError, formatKeyReply, formatReply, parseRequest, type ErrorCode } from '@ticketing/protocol';
import type { LockEngine } from '../engine/lock-engine.js';
import type { Waiter, WaiterOwner } from '../engine/waiter.js';
import type { Clock } from '../seams/clock.js';
import type { Stream } from '../seams/transport.js';
import type { Token } from '../state-machine/commands.js';
import { ReplyQueue, type AcquireAnswer, type AcquireSlot, type CommitGate } from './reply-queue.js';
import { keyAllowed, type ClientIdentities, type ClientIdentity, type IdentityCounts } from './identities.js';

/**
 * Releases and extensions answered N or G in a row after which a connection
 * is closed: a client retrying one never comes near it, one guessing tokens
 * does.
 */
export const MAX_RELEASE_MISSES = 64;

/** What a session needs from the node it belongs to. */
export interface SessionContext {
  readonly engine: LockEngine;
  readonly clock: Clock;
  readonly nodeName: string;
  /** Most unanswered acquires per connection (beyond it: `B`; at twice it: `E unavailable`). */
  readonly maxPendingPerConn: number;
  /** True when `H` with a client token must come first. */
  readonly tokensRequired: boolean;
  /**
   * Who a client token belongs to (constant-time check); undefined when it is
   * none of them; 'throttled' when `remote` failed too often to be checked now.
   */
  identify(token: string, remote: string | undefined): ClientIdentity | 'throttled' | undefined;
  /** Per-identity counters, for /metrics. */
  readonly identities: Pick<ClientIdentities, 'countsOf'>;
  /** True while the node holds client requests back (a hand-off is under way). */
  clientsHeld(): boolean;
  /** Called before every write to the client: replication of what a reply reports leaves first. */
  flushReplication(): void;
  /**
   * Undefined while this node serves clients; otherwise the `M` reply's
   * address (or '-' when no active node is known).
   */
  redirectTarget(): string | undefined;
  /** Raft leader: replies wait for their log index to commit. */
  holdingReplies(): boolean;
  /**
   * Raft leader: the log index a reply written now depends on (replies wait
   * until it commits). Undefined when replies go out at once.
   */
  gateIndex(): number | undefined;
  /** The commit index replies are released up to. */
  committedIndex(): number;
  /** The session holds replies waiting for a commit: call releaseCommitted() when it advances. */
  awaitCommit(session: Session): void;
  /**
   * Priority active with sync-standbys: how long past its wait (at least) a
   * held grant may wait for the standbys before it is answered T instead;
   * undefined: never (Raft: a leader that cannot commit steps down).
   */
  heldGrantLimitMs(): number | undefined;
  /** The session has ended (its socket is closed). */
  sessionClosed(session: Session): void;
  /** A session ended with an error it sent to the client (for logs and metrics). */
  sessionFailed(session: Session, code: ErrorCode, text: string): void;
  /** A fault of the server's own code while serving this connection (it was answered `E internal`). */
  internalError(err: Error): void;
}

const PONG = formatReply({ op: 'P' });

/**
 * A session's view of the node's commit positions: one small object per
 * connection where an object of four closures took about 300 bytes more
 * (memory per idle connection is a target: <= 5 KB).
 */
class NodeCommitGate implements CommitGate {
  constructor(
    private readonly ctx: SessionContext,
    private readonly session: Session,
  ) {}

  holding(): boolean {
    return this.ctx.holdingReplies();
  }

  gateIndex(): number | undefined {
    return this.ctx.gateIndex();
  }

  committedIndex(): number {
    return this.ctx.committedIndex();
  }

  awaitCommit(): void {
    this.ctx.awaitCommit(this.session);
  }
}

/** Seconds a closing connection may take to read its last replies before it is cut. */
const CLOSE_GRACE_MS = 5_000;

export class Session implements WaiterOwner {
  readonly remote: string;
  /** Who the connection authenticated as in `H` (undefined: no token, or a bare one). */
  private client: ClientIdentity | undefined;
  private counts: IdentityCounts;
  /** Releases and extensions answered N or G since the last one that named a current grant. */
  private releaseMisses = 0;
  /** The connection no longer takes replies for waiters (closing or closed). */
  private ended = false;
  private closed = false;
  private greeted = false;
  private linesSeen = 0;
  private readonly replies: ReplyQueue;
  private flushQueued = false;
  /** Inside this session's own data handler (its replies go out together at its end). */
  private reading = false;
  /** Not reading because the client does not read its replies (back-pressure). */
  private paused = false;
  /** Not reading because the node is handing off to another node. */
  private held = false;
  private drainWatched = false;
  private readonly framer = new LineFramer();
  /** The session should close once its held-back replies are out. */
  private endPending = false;
  /** Clock time of the last bytes received. */
  private lastActivity: number;
  /** Clock time the connection was accepted (the `H` deadline counts from it). */
  private readonly openedAt: number;
  /** When the unfinished line now buffered started arriving. */
  private partialSince: number | undefined;

  constructor(
    private readonly socket: Stream,
    private readonly ctx: SessionContext,
  ) {
    this.lastActivity = ctx.clock.now();
    this.openedAt = this.lastActivity;
    this.counts = ctx.identities.countsOf(undefined);
    this.counts.connections++;
    this.remote = `${socket.remoteAddress}:${socket.remotePort}`;
    this.replies = new ReplyQueue((text) => this.write(text), new NodeCommitGate(ctx, this));
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('end', () => this.onEnd());
    socket.on('close', () => this.onClose());
    socket.on('error', () => {
      /* 'close' follows; nothing to add */
    });
    if (ctx.clientsHeld()) this.pauseReading();
  }

  /** Writes `E <code> <text>` and closes; waiting acquires leave their queues. */
  fail(code: ErrorCode, text: string): void {
    if (this.ended) return;
    this.endSession(formatError(code, text));
    this.ctx.sessionFailed(this, code, text);
  }

  /**
   * A lock request reached a node whose engine does not serve (stopping, or
   * stepped down since this connection's first line): its table is not the
   * cluster's, so `N`, `G` or `B` from it would be false. Redirect when the
   * node knows where to, else `E unavailable`.
   */
  private notServing(): false {
    const target = this.ctx.redirectTarget();
    if (target !== undefined) this.redirect(target);
    else this.fail('unavailable', 'this node is not serving locks now (it is stopping or has just stepped down): connect again');
    return false;
  }

  /** Writes `M <address>` and closes. */
  redirect(address: string): void {
    if (this.ended) return;
    this.endSession(formatReply({ op: 'M', address }));
  }

  /** Waiter outcomes, from the engine. */
  granted(waiter: Waiter, token: Token): boolean {
    if (this.ended) return false;
    this.decide(waiter, 'A', token, this.holdDeadline((waiter.tag as AcquireSlot).waitEnd, waiter.leaseMs));
    return true;
  }

  timedOut(waiter: Waiter): void {
    this.decide(waiter, 'T', 0n);
  }

  private onData(chunk: Buffer): void {
    if (this.ended) return;
    this.lastActivity = this.ctx.clock.now();
    this.reading = true;
    try {
      const result = this.framer.push(chunk, this.onLine);
      if (result === 'toolong') this.fail('toolong', 'line longer than 512 bytes');
    } catch (err) {
      // A fault of ours must cost this connection, never the server and its other clients; and the
      // node hears of it (a safety assertion stops it: issue 27, D-9).
      this.ctx.internalError(err as Error);
      this.fail('internal', `internal error: ${(err as Error).message}`);
    } finally {
      this.reading = false;
    }
    if (!this.framer.hasPartialLine) this.partialSince = undefined;
    else this.partialSince ??= this.lastActivity;
    this.flush();
  }

  /**
   * Closes a connection that holds resources without using them: a line
   * trickling in for longer than `lineMs`, nothing at all for `idleMs`
   * while no acquire of it is waiting, or no `H` within `helloMs` when
   * client tokens are required (an unauthenticated connection must not hold
   * a slot for long).
   */
  checkTimeouts(now: number, idleMs: number, lineMs: number, helloMs = Infinity): void {
    if (this.ended) return;
    if (!this.greeted && this.ctx.tokensRequired && now - this.openedAt > helloMs) {
      this.fail('auth', `no H with a client token within ${helloMs} ms`);
    } else if (this.partialSince !== undefined && now - this.partialSince > lineMs) {
      this.fail('proto', `line not completed within ${lineMs} ms`);
    } else if (this.replies.unanswered === 0 && now - this.lastActivity > idleMs) {
      this.fail('unavailable', `idle for more than ${idleMs} ms`);
    }
  }

  private readonly onLine = (buf: Buffer, start: number, end: number): boolean => {
    const request = parseRequest(buf, start, end);
    if (request instanceof WireError) {
      this.fail(request.code, request.text);
      return false;
    }
    const first = this.linesSeen++ === 0;
    if (request.op === 'H') return this.hello(first, request.clientToken);
    if (!this.greeted && this.ctx.tokensRequired) {
      this.fail('auth', 'this server requires a client token: send H 1 <token> first');
      return false;
    }
    if (first) {
      const target = this.ctx.redirectTarget();
      if (target !== undefined) {
        this.redirect(target);
        return false;
      }
    }
    if (request.op !== 'P' && !this.ctx.engine.serving) return this.notServing();
    switch (request.op) {
      case 'A':
        this.acquire(request.key, request.waitSeconds, request.leaseSeconds);
        return !this.ended;
      case 'R': {
        if (!this.keyPermitted(request.key)) return false;
        // Decided before appending: a release may hand the key to a waiter on this very connection.
        const released = this.ctx.engine.release(request.key, request.token, this.client?.name, this.lastActivity);
        this.replies.push(formatKeyReply(released ? 'R' : 'N', request.key));
        this.counts.releases++;
        if (!released) this.counts.notReleased++;
        return this.tokenNamed(released);
      }
      case 'X': {
        if (!this.keyPermitted(request.key)) return false;
        // The lease runs from when the request arrived; the reply waits for its replication like a grant's.
        const extended = this.ctx.engine.extend(request.key, request.token, request.leaseSeconds * 1000, this.client?.name, this.lastActivity);
        this.replies.push(formatKeyReply(extended ? 'X' : 'G', request.key));
        return this.tokenNamed(extended);
      }
      case 'P':
        this.replies.push(PONG);
        return true;
    }
  };

  /**
   * A named identity may not even try keys outside its prefixes (tokens are
   * sequential: easy to guess): `E perm`, as for an acquire. R and X alike.
   */
  private keyPermitted(key: string): boolean {
    if (keyAllowed(this.client, key)) return true;
    this.counts.denied++;
    this.fail('perm', `key outside the prefixes client ${this.client!.name ?? '-'} may use`);
    return false;
  }

  /**
   * Counts a release or extension that named no current grant (`N`, `G`):
   * a client retrying one never comes near the limit, one guessing tokens
   * does. Returns whether to go on reading.
   */
  private tokenNamed(hit: boolean): boolean {
    if (hit) {
      this.releaseMisses = 0;
      return true;
    }
    if (++this.releaseMisses < MAX_RELEASE_MISSES) return true;
    this.fail('proto', `${MAX_RELEASE_MISSES} releases or extensions in a row named no lock held under that token by this client`);
    return false;
  }

  private hello(first: boolean, clientToken: string | undefined): boolean {
    if (!first) {
      this.fail('proto', this.greeted ? 'H may come only once' : 'H must be the first line');
      return false;
    }
    const identity = this.ctx.tokensRequired && clientToken !== undefined ? this.ctx.identify(clientToken, this.socket.remoteAddress) : undefined;
    if (identity === 'throttled') {
      this.fail('auth', 'too many failed authentications from this address; try again later');
      return false;
    }
    if (this.ctx.tokensRequired && identity === undefined) {
      this.fail('auth', clientToken === undefined ? 'this server requires a client token: H 1 <token>' : 'wrong client token');
      return false;
    }
    this.greeted = true;
    if (identity !== undefined) {
      this.client = identity;
      this.counts.connections--;
      this.counts = this.ctx.identities.countsOf(identity);
      this.counts.connections++;
    }
    const target = this.ctx.redirectTarget();
    if (target !== undefined) {
      this.redirect(target);
      return false;
    }
    this.replies.push(formatReply({ op: 'H', nodeName: this.ctx.nodeName }));
    return true;
  }

  /** The named identity of this connection: its grants carry it, and only it releases them. */
  get identity(): string | undefined {
    return this.client?.name;
  }

  private acquire(key: string, waitSeconds: number, leaseSeconds: number): void {
    this.counts.acquires++;
    if (!keyAllowed(this.client, key)) {
      this.counts.denied++;
      this.fail('perm', `key outside the prefixes client ${this.client!.name ?? '-'} may use`);
      return;
    }
    const limit = this.ctx.maxPendingPerConn;
    const pending = this.replies.unanswered;
    if (pending >= 2 * limit) {
      this.fail('unavailable', `more than ${2 * limit} unanswered acquires on this connection; read the replies`);
      return;
    }
    if (pending >= limit) return this.replies.answered(key, 'B', 0n);
    // The chunk's arrival time stands for every request in it (one clock read per read, not per request).
    const outcome = this.ctx.engine.acquire(this, key, waitSeconds * 1000, leaseSeconds * 1000, undefined, this.lastActivity);
    // An earlier acquire of this key on this connection may still be unanswered: the queue puts this
    // reply behind it. (Looked at only now: the engine call may have answered earlier ones, by a hand-off.)
    const waitEnd = this.lastActivity + waitSeconds * 1000;
    if (typeof outcome === 'bigint') this.replies.answered(key, 'A', outcome, this.holdDeadline(waitEnd, leaseSeconds * 1000));
    else if (outcome === 'timeout') this.replies.answered(key, 'T', 0n);
    else if (outcome === 'busy') this.replies.answered(key, 'B', 0n);
    else outcome.tag = this.replies.queued(key, outcome, waitEnd);
  }

  /**
   * When a grant the commit gate holds is answered T instead: once its wait
   * has run out (and the hold limit has passed), and never after its lease
   * would end. Undefined when replies are not held or never expire.
   */
  private holdDeadline(waitEnd: number, leaseMs: number): number | undefined {
    const limit = this.ctx.heldGrantLimitMs();
    if (limit === undefined || !this.ctx.holdingReplies()) return undefined;
    const now = this.ctx.clock.now();
    return Math.min(Math.max(waitEnd, now + limit), now + leaseMs);
  }

  /** Held grants past their deadline are answered T and released (see ReplyQueue.expireHeld). */
  expireHeldGrants(now: number): void {
    if (!this.closed) this.replies.expireHeld(now, (key, token) => this.ctx.engine.release(key, token, this.identity));
  }

  private decide(waiter: Waiter, answer: AcquireAnswer, token: Token, deadline?: number): void {
    this.replies.decide(waiter.tag as AcquireSlot, answer, token, deadline);
    // A hand-off (another connection's release) is on the critical path of a contended key: write it
    // now, before the releaser's own reply. While this session reads its own input, batch as usual.
    if (this.reading) this.queueFlush();
    else this.flush();
  }

  /** Waiting acquires leave their queues (the connection is closing); decided replies are kept. */
  private dropWaiters(): void {
    this.replies.dropWaiters((waiter) => this.ctx.engine.cancel(waiter));
  }

  private endSession(lastLine: string): void {
    this.ended = true;
    this.dropWaiters();
    this.replies.push(lastLine);
    this.flush();
    this.closeSoon();
  }

  private closeSoon(): void {
    if (this.replies.hasGated) this.endPending = true;
    else this.socket.end();
    // A peer that never reads (or a commit that never comes) would keep the socket open forever.
    this.ctx.clock.schedule(CLOSE_GRACE_MS, () => this.socket.destroy());
  }

  /** FIN from the client: its waiting acquires leave their queues; what was decided is still written. */
  private onEnd(): void {
    if (this.ended) return;
    this.ended = true;
    this.dropWaiters();
    this.flush();
    this.closeSoon();
  }

  private onClose(): void {
    if (this.closed) return;
    this.closed = true;
    this.counts.connections--;
    this.ended = true;
    this.dropWaiters();
    // Grants decided for this connection whose replies never left would be ghost locks: release them,
    // as the identity that holds them (a named identity's grant refuses any other: issue 27, D-2).
    // One the engine still holds by that token and will not release is a ghost lock: our fault.
    const identity = this.client?.name;
    this.replies.abandon((key, token) => {
      if (this.ctx.engine.release(key, token, identity) || this.ctx.engine.held(key)?.token !== token) return;
      this.ctx.internalError(new Error(`the ghost grant ${token} of ${key} (its connection closed before the reply left) was not released: it stays held until its lease ends`));
    });
    this.ctx.sessionClosed(this);
  }

  private queueFlush(): void {
    if (!this.flushQueued) {
      this.flushQueued = true;
      // A closure per deferred flush, not one kept per connection: this runs only for hand-offs while reading.
      this.ctx.clock.defer(() => {
        this.flushQueued = false;
        this.flush();
      });
    }
  }

  private flush(): void {
    if (!this.closed) this.replies.flush();
  }

  /** Writes the held-back replies whose log index has committed. */
  releaseCommitted(): void {
    this.replies.releaseCommitted();
    if (!this.replies.hasGated && this.endPending && !this.closed) this.socket.end();
  }

  /**
   * The node stops leading: replies that committed still go out; the others
   * are dropped (indeterminate). A connection that lost a reply is closed
   * without another byte: its client matches replies by (op, key), so any
   * later line (the step-down's T to a queued acquire of the same key, even an
   * M) could be read as the answer to the request whose reply was dropped.
   * It is reset, not closed cleanly: a clean close tells a client that its
   * unanswered acquires were not granted (issue 27, D-5), and one of them may
   * have been.
   */
  dropUncommitted(): void {
    if (this.replies.dropUncommitted()) {
      this.ended = true;
      this.replies.silence();
      this.dropWaiters();
      if (!this.closed) this.socket.resetAndDestroy();
      return;
    }
    if (this.endPending && !this.closed) this.socket.end();
  }

  private write(data: string): void {
    this.ctx.flushReplication();
    if (!this.socket.write(data) && !this.paused && !this.ended) {
      // The client is not reading fast enough: stop reading its requests until it does.
      this.paused = true;
      this.socket.pause();
      this.watchDrain();
    }
  }

  /**
   * Resumes reading when the socket has sent what it buffered. Added the
   * first time a client falls behind: a listener (and its closure) less on
   * every connection that never does.
   */
  private watchDrain(): void {
    if (this.drainWatched) return;
    this.drainWatched = true;
    this.socket.on('drain', () => {
      if (this.paused && !this.ended) {
        this.paused = false;
        if (!this.held) this.socket.resume();
      }
    });
  }

  /** Stops taking requests for a while (a cluster hand-off); nothing is lost, they wait in the socket. */
  pauseReading(): void {
    this.held = true;
    this.socket.pause();
  }

  resumeReading(): void {
    if (!this.held) return;
    this.held = false;
    if (!this.paused && !this.ended) this.socket.resume();
  }

  get hasHeldReplies(): boolean {
    return this.replies.hasGated;
  }

  get isEnded(): boolean {
    return this.ended;
  }
}
