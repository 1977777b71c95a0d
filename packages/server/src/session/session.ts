/**
 * One client connection: framing, the optional `H` handshake, pipelining,
 * the per-(op, key) reply order, back-pressure, and `E` then close.
 *
 * Replies are gathered into one string and written once per batch of input
 * (or once per tick for replies decided later), so a pipelining client costs
 * one write per read, not one per request.
 */
import type { Socket } from 'node:net';
import { LineFramer, WireError, formatError, parseRequest, type ErrorCode } from '@ticketing/protocol';
import type { LockEngine } from '../engine/lock-engine.js';
import type { Waiter, WaiterOwner } from '../engine/waiter.js';
import type { Token } from '../state-machine/commands.js';

/** What a session needs from the node it belongs to. */
export interface SessionContext {
  readonly engine: LockEngine;
  readonly nodeName: string;
  /** Most unanswered acquires per connection (beyond it: `B`; at twice it: `E unavailable`). */
  readonly maxPendingPerConn: number;
  /** True when `H` with a client token must come first. */
  readonly tokensRequired: boolean;
  /** Constant-time check of a client token. */
  checkClientToken(token: string): boolean;
  /** True while the node holds client requests back (a hand-off is under way). */
  clientsHeld(): boolean;
  /**
   * Undefined while this node serves clients; otherwise the `M` reply's
   * address (or '-' when no active node is known).
   */
  redirectTarget(): string | undefined;
  /**
   * Raft leader: the log index a reply written now depends on (replies wait
   * until it commits). Undefined when replies go out at once.
   */
  gateIndex(): number | undefined;
  /** The commit index replies are released up to. */
  committedIndex(): number;
  /** The session holds replies waiting for a commit: call releaseCommitted() when it advances. */
  awaitCommit(session: Session): void;
  /** The session has ended (its socket is closed). */
  sessionClosed(session: Session): void;
  /** A session ended with an error it sent to the client (for logs and metrics). */
  sessionFailed(session: Session, code: ErrorCode, text: string): void;
}

/** An acquire whose reply is not written yet, in its key's line. */
interface AcquireSlot {
  reply: string | undefined;
  waiter: Waiter | undefined;
}

/** Seconds a closing connection may take to read its last replies before it is cut. */
const CLOSE_GRACE_MS = 5_000;

export class Session implements WaiterOwner {
  readonly remote: string;
  /** The connection no longer takes replies for waiters (closing or closed). */
  private ended = false;
  private closed = false;
  private greeted = false;
  private linesSeen = 0;
  private out = '';
  private flushQueued = false;
  /** Inside this session's own data handler (its replies go out together at its end). */
  private reading = false;
  /** Not reading because the client does not read its replies (back-pressure). */
  private paused = false;
  /** Not reading because the node is handing off to another node. */
  private held = false;
  /** Acquires not answered yet (written) on this connection: queued, or decided but held back by order. */
  private unanswered = 0;
  /** Keys with unwritten acquire replies: their slots in request order. */
  private readonly slots = new Map<string, AcquireSlot[]>();
  private readonly framer = new LineFramer();
  /** Replies waiting for the log index they depend on to commit (Raft leader), in order. */
  private gated: Array<{ text: string; index: number }> = [];
  /** The session should close once its held-back replies are out. */
  private endPending = false;
  /** performance.now() of the last bytes received. */
  private lastActivity = performance.now();
  /** When the unfinished line now buffered started arriving. */
  private partialSince: number | undefined;
  private readonly flushFn = (): void => {
    this.flushQueued = false;
    this.flush();
  };

  constructor(
    private readonly socket: Socket,
    private readonly ctx: SessionContext,
  ) {
    this.remote = `${socket.remoteAddress}:${socket.remotePort}`;
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('end', () => this.onEnd());
    socket.on('close', () => this.onClose());
    socket.on('error', () => {
      /* 'close' follows; nothing to add */
    });
    if (ctx.clientsHeld()) this.pauseReading();
    socket.on('drain', () => {
      if (this.paused && !this.ended) {
        this.paused = false;
        if (!this.held) socket.resume();
      }
    });
  }

  /** Writes `E <code> <text>` and closes; waiting acquires leave their queues. */
  fail(code: ErrorCode, text: string): void {
    if (this.ended) return;
    this.endSession(formatError(code, text));
    this.ctx.sessionFailed(this, code, text);
  }

  /** Writes `M <address>` and closes. */
  redirect(address: string): void {
    if (this.ended) return;
    this.endSession(`M ${address}\n`);
  }

  /** Waiter outcomes, from the engine. */
  granted(waiter: Waiter, token: Token): boolean {
    if (this.ended) return false;
    this.decide(waiter, `A ${token} ${waiter.key}\n`);
    return true;
  }

  timedOut(waiter: Waiter): void {
    this.decide(waiter, `T ${waiter.key}\n`);
  }

  private onData(chunk: Buffer): void {
    if (this.ended) return;
    this.lastActivity = performance.now();
    this.reading = true;
    try {
      const result = this.framer.push(chunk, this.onLine);
      if (result === 'toolong') this.fail('toolong', 'line longer than 512 bytes');
    } catch (err) {
      // A fault of ours must cost this connection, never the server and its other clients.
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
   * trickling in for longer than `lineMs`, or nothing at all for `idleMs`
   * while no acquire of it is waiting.
   */
  checkTimeouts(now: number, idleMs: number, lineMs: number): void {
    if (this.ended) return;
    if (this.partialSince !== undefined && now - this.partialSince > lineMs) {
      this.fail('proto', `line not completed within ${lineMs} ms`);
    } else if (this.unanswered === 0 && now - this.lastActivity > idleMs) {
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
    switch (request.op) {
      case 'A':
        this.acquire(request.key, request.waitSeconds, request.leaseSeconds);
        return !this.ended;
      case 'R': {
        // Decided before appending: a release may hand the key to a waiter on this very connection.
        const released = this.ctx.engine.release(request.key, request.token);
        this.out += released ? `R ${request.key}\n` : `N ${request.key}\n`;
        return true;
      }
      case 'P':
        this.out += 'P\n';
        return true;
    }
  };

  private hello(first: boolean, clientToken: string | undefined): boolean {
    if (!first) {
      this.fail('proto', this.greeted ? 'H may come only once' : 'H must be the first line');
      return false;
    }
    if (this.ctx.tokensRequired && (clientToken === undefined || !this.ctx.checkClientToken(clientToken))) {
      this.fail('auth', clientToken === undefined ? 'this server requires a client token: H 1 <token>' : 'wrong client token');
      return false;
    }
    this.greeted = true;
    const target = this.ctx.redirectTarget();
    if (target !== undefined) {
      this.redirect(target);
      return false;
    }
    this.out += `H 1 ${this.ctx.nodeName}\n`;
    return true;
  }

  private acquire(key: string, waitSeconds: number, leaseSeconds: number): void {
    const limit = this.ctx.maxPendingPerConn;
    let reply: string;
    if (this.unanswered >= limit) {
      if (this.unanswered >= 2 * limit) {
        this.fail('unavailable', `more than ${2 * limit} unanswered acquires on this connection; read the replies`);
        return;
      }
      reply = `B ${key}\n`;
    } else {
      const outcome = this.ctx.engine.acquire(this, key, waitSeconds * 1000, leaseSeconds * 1000, undefined);
      if (typeof outcome === 'bigint') reply = `A ${outcome} ${key}\n`;
      else if (outcome === 'timeout') reply = `T ${key}\n`;
      else if (outcome === 'busy') reply = `B ${key}\n`;
      else {
        const slot: AcquireSlot = { reply: undefined, waiter: outcome };
        outcome.tag = slot;
        this.addSlot(key, slot);
        return;
      }
    }
    // An earlier acquire of this key on this connection is still unanswered: this reply waits behind it.
    // (Looked up only now: the engine call may have answered earlier ones, by a hand-off.)
    if (this.slots.has(key)) this.addSlot(key, { reply, waiter: undefined });
    else this.out += reply;
  }

  private addSlot(key: string, slot: AcquireSlot): void {
    const line = this.slots.get(key);
    if (line === undefined) this.slots.set(key, [slot]);
    else line.push(slot);
    this.unanswered++;
  }

  private decide(waiter: Waiter, reply: string): void {
    const slot = waiter.tag as AcquireSlot;
    slot.reply = reply;
    slot.waiter = undefined;
    this.writeDecided(waiter.key);
    // A hand-off (another connection's release) is on the critical path of a contended key: write it
    // now, before the releaser's own reply. While this session reads its own input, batch as usual.
    if (this.reading) this.queueFlush();
    else this.flush();
  }

  /** Moves the decided replies at the front of `key`'s line to the output. */
  private writeDecided(key: string): void {
    const line = this.slots.get(key);
    if (line === undefined) return;
    let n = 0;
    while (n < line.length && line[n]!.reply !== undefined) {
      this.out += line[n]!.reply;
      n++;
    }
    if (n === 0) return;
    this.unanswered -= n;
    if (n === line.length) this.slots.delete(key);
    else line.splice(0, n);
  }

  /** Waiting acquires leave their queues (the connection is closing); decided replies are kept. */
  private dropWaiters(): void {
    for (const [key, line] of [...this.slots]) {
      const kept = line.filter((slot) => {
        if (slot.waiter === undefined) return true;
        this.ctx.engine.cancel(slot.waiter);
        this.unanswered--;
        return false;
      });
      if (kept.length === 0) this.slots.delete(key);
      else {
        this.slots.set(key, kept);
        this.writeDecided(key);
      }
    }
  }

  private endSession(lastLine: string): void {
    this.ended = true;
    this.dropWaiters();
    this.out += lastLine;
    this.flush();
    this.closeSoon();
  }

  private closeSoon(): void {
    if (this.gated.length > 0) this.endPending = true;
    else this.socket.end();
    // A peer that never reads (or a commit that never comes) would keep the socket open forever.
    setTimeout(() => this.socket.destroy(), CLOSE_GRACE_MS).unref();
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
    this.ended = true;
    this.dropWaiters();
    this.releaseUnsentGrants();
    this.out = '';
    this.gated = [];
    this.ctx.sessionClosed(this);
  }

  /**
   * Grants decided for this connection whose replies never left (held back by
   * order, or waiting for a commit) would be ghost locks: release them now.
   */
  private releaseUnsentGrants(): void {
    const unsent = [this.out, ...this.gated.map((g) => g.text)];
    for (const line of this.slots.values()) for (const slot of line) if (slot.reply !== undefined) unsent.push(slot.reply);
    for (const text of unsent) {
      for (const m of text.matchAll(/^A (\d+) ([^ \n]+)$/gm)) this.ctx.engine.release(m[2]!, BigInt(m[1]!));
    }
  }

  private queueFlush(): void {
    if (!this.flushQueued) {
      this.flushQueued = true;
      process.nextTick(this.flushFn);
    }
  }

  private flush(): void {
    if (this.out.length === 0 || this.closed) return;
    const data = this.out;
    this.out = '';
    const gate = this.ctx.gateIndex();
    if (gate === undefined && this.gated.length === 0) return this.write(data);
    this.gated.push({ text: data, index: gate ?? 0 });
    this.releaseCommitted();
    if (this.gated.length > 0) this.ctx.awaitCommit(this);
  }

  /** Writes the held-back replies whose log index has committed. */
  releaseCommitted(): void {
    const commit = this.ctx.committedIndex();
    let n = 0;
    while (n < this.gated.length && this.gated[n]!.index <= commit) this.write(this.gated[n++]!.text);
    if (n > 0) this.gated.splice(0, n);
    if (this.gated.length === 0 && this.endPending && !this.closed) this.socket.end();
  }

  /**
   * The node stops leading: replies that committed still go out; the others
   * are dropped (this node cannot know whether they will commit, so the
   * client must treat those requests as indeterminate).
   */
  dropUncommitted(): void {
    this.releaseCommitted();
    this.gated = [];
    if (this.endPending && !this.closed) this.socket.end();
  }

  private write(data: string): void {
    if (!this.socket.write(data) && !this.paused && !this.ended) {
      // The client is not reading fast enough: stop reading its requests until it does.
      this.paused = true;
      this.socket.pause();
    }
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
    return this.gated.length > 0;
  }

  get isEnded(): boolean {
    return this.ended;
  }
}
