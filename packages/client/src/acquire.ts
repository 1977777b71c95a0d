/**
 * One `broker.acquire()`, from its `A` to its outcome: never re-sent when
 * its outcome is unknown, re-sent (with the wait that is left) only where
 * the server said nothing was granted, and a grant becomes a ticket only
 * with the lease the caller asked to work with (CLIENT.md).
 *
 * It is the owner of its request on the connection, so a reply settles it
 * directly: the caller's promise is the only one per acquire.
 */
import type { Connection, Outcome, Pending, RequestOwner } from './connection.js';
import { CapacityError, ClosedError, IndeterminateError, InsufficientLeaseError, PermissionError, ProtocolError, TimeoutError } from './errors.js';
import type { AcquireRequest } from './options.js';
import type { ResendHost } from './resend.js';
import { Ticket, type TicketOwner } from './ticket.js';
import { conservativeLeaseMs, now, timing } from './timing.js';

/** What an acquire needs from its broker. */
export interface AcquireHost extends ResendHost {
  /** close() was called. */
  readonly closed: boolean;
  /** Releases a grant nobody will use, in the background. */
  compensate(key: string, token: bigint): void;
  readonly ticketOwner: TicketOwner;
}

export class Acquire implements RequestOwner {
  readonly promise: Promise<Ticket>;
  private resolve!: (ticket: Ticket) => void;
  private reject!: (reason: unknown) => void;
  private done = false;
  /** The attempt in flight; undefined between attempts (a re-send looking for a connection). */
  private conn: Connection | undefined;
  private pending: Pending | undefined;
  /** The wait that is left for a re-send counts down to this (monotonic ms). */
  private readonly waitEndsAt: number;
  private waitSeconds: number;
  private stepDowns = 0;
  private readonly onSignal: (() => void) | undefined;

  constructor(
    private readonly host: AcquireHost,
    private readonly req: AcquireRequest,
    conn: Connection,
  ) {
    this.promise = new Promise<Ticket>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.waitEndsAt = now() + req.waitSeconds * 1000;
    this.waitSeconds = req.waitSeconds;
    const { signal } = req;
    if (signal !== undefined) {
      this.onSignal = () => this.abort(signal.reason, true);
      signal.addEventListener('abort', this.onSignal, { once: true });
    }
    this.send(conn);
  }

  private send(conn: Connection): void {
    this.conn = conn;
    this.pending = conn.send('A', this.req.key, `A ${this.req.key} ${this.waitSeconds} ${this.req.leaseSeconds}\n`, this.waitSeconds, this);
  }

  /**
   * Gives up (the caller's signal, or close()): rejects with `reason`. Before
   * the write nothing is undone (nothing left); after a possible write, the
   * connection is half-closed when `halfClose` (the server then drops the
   * waiter; not needed on close, which closes every connection), and a
   * grant that still arrives is released by its exact token (see settled).
   */
  abort(reason: unknown, halfClose: boolean): void {
    if (this.done) return;
    const { conn, pending } = this;
    this.fail(reason);
    // Cancelled in the turn of the call: the `A` never left, so there is nothing to undo.
    if (pending !== undefined && !conn!.unsend(pending) && halfClose) conn!.halfClose();
  }

  settled(p: Pending, outcome: Outcome, conn: Connection): void {
    if (this.done) {
      // Aborted after a possible write: a grant that still comes is released by its exact token.
      if (outcome.kind === 'reply' && outcome.reply.op === 'A') this.host.compensate(this.req.key, outcome.reply.token);
      return;
    }
    this.pending = undefined;
    const key = this.req.key;
    if (outcome.kind === 'lost') {
      if (outcome.error instanceof PermissionError) {
        this.fail(new PermissionError(`${key} was refused: ${outcome.error.message}; nothing was granted`, { cause: outcome.error }));
        return;
      }
      // Never re-sent (M included): the server may have granted it.
      this.fail(new IndeterminateError(key, `the acquire of ${key} may have reached the server but its reply was lost: ${outcome.error.message}`, { cause: outcome.error }));
      return;
    }
    // 'unsent' (never left) and 'dropped' (the server said it dropped it): nothing was granted.
    if (outcome.kind !== 'reply') {
      void this.resend(undefined);
      return;
    }
    const reply = outcome.reply;
    if (reply.op === 'A') return this.granted(reply.token, p.sentAt);
    if (reply.op === 'B') return this.fail(new CapacityError(key, `the server is at a limit and refused ${key} (B); nothing was queued or granted`));
    if (reply.op !== 'T') return this.fail(new ProtocolError(`unexpected reply ${reply.op} to an acquire`));
    // A `T` well before the wait could have run out: the node stepped down; nothing was granted.
    const early = now() < p.sentAt + this.waitSeconds * 1000 - timing.earlyTimeoutMs;
    if (!early || ++this.stepDowns > timing.maxStepDownResends) return this.fail(this.timeout());
    // Not to that node again unless it came back: it is closing all its connections.
    // (The connection may be closed already, by the `M` that came with the `T`: its name is kept.)
    const [node, steppedDownAt] = [conn.nodeName, now()];
    void this.resend((c) => c.nodeName !== node || c.readySince! > steppedDownAt);
  }

  /** A grant becomes a ticket only with positive conservative lease left, and at least `minWorkMs`. */
  private granted(token: bigint, sentAt: number): void {
    const { req, host } = this;
    const leaseEndsAt = sentAt + conservativeLeaseMs(req.leaseSeconds);
    const remaining = leaseEndsAt - now();
    if (remaining <= 0 || remaining < req.minWorkMs || host.closed) {
      host.compensate(req.key, token);
      this.fail(host.closed ? new ClosedError('the broker was closed') : new InsufficientLeaseError(req.key, token, remaining, req.minWorkMs));
      return;
    }
    if (this.settle()) this.resolve(new Ticket(host.ticketOwner, req.key, token, leaseEndsAt, req.leaseSeconds, req.keepAlive));
  }

  /** Nothing was granted: re-send, with the wait that is left, on another usable connection. */
  private async resend(accept: ((c: Connection) => boolean) | undefined): Promise<void> {
    const { req, host } = this;
    this.conn = undefined;
    try {
      const signal = req.signal === undefined ? host.closeSignal : AbortSignal.any([req.signal, host.closeSignal]);
      const conn = await host.pool.pickBy(this.waitEndsAt, signal, accept);
      if (this.done) return;
      if (host.closed) throw new ClosedError('the broker was closed');
      if (conn === undefined) throw req.waitSeconds === 0 ? host.pool.notReadyError() : this.timeout();
      // Rounded down: a re-sent acquire never waits past the caller's wait.
      this.waitSeconds = Math.max(0, Math.floor((this.waitEndsAt - now()) / 1000));
      this.send(conn);
    } catch (err) {
      this.fail(err);
    }
  }

  private timeout(): TimeoutError {
    return new TimeoutError(this.req.key, `${this.req.key} was not granted within ${this.req.waitSeconds} s`);
  }

  private fail(reason: unknown): void {
    if (this.settle()) this.reject(reason);
  }

  /** Marks it settled (once): true the first time. */
  private settle(): boolean {
    if (this.done) return false;
    this.done = true;
    if (this.onSignal !== undefined) this.req.signal!.removeEventListener('abort', this.onSignal);
    return true;
  }
}
