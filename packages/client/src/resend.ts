/**
 * Requests whose repeats are harmless, an exact-token `R` (release) or `X`
 * (extension), sent until their first final reply or their deadline: on a
 * connection that fails, again at once on another; on one that stays silent
 * for releaseResendMs, also on another (a duplicate gets `N`, or extends
 * again from a later moment: never less than the answered attempt
 * promised). The first final reply decides.
 *
 * Each is one object: its promise, the owner of its requests on the
 * connections, and its one deadline on the wheel (the next re-send or the
 * end of its window, whichever is first).
 */
import type { Reply } from '@ticketing/protocol';
import type { Connection, Outcome, Pending, RequestOwner } from './connection.js';
import { PermissionError, ReleaseFailedError } from './errors.js';
import type { Pool } from './pool.js';
import type { ExtendOutcome, ReleaseResult } from './ticket.js';
import { now, timing } from './timing.js';
import { Deadline, type Wheel } from './wheel.js';

/** What a re-sent request needs from its broker. */
export interface ResendHost {
  readonly pool: Pool;
  readonly wheel: Wheel;
  /** Aborted by close(): an extension then ends at once (close() does not wait for extensions). */
  readonly closeSignal: AbortSignal;
  /** A release started (close() waits for releases in flight). */
  releaseStarted(): void;
  releaseSettled(): void;
}

abstract class Resend<T> extends Deadline implements RequestOwner {
  readonly promise: Promise<T>;
  protected resolve!: (value: T) => void;
  protected reject!: (error: Error) => void;
  /** Connections carrying it, unanswered (nearly always one). */
  private readonly inFlight: Connection[] = [];
  protected lastError: Error | undefined;
  private done = false;

  constructor(
    protected readonly host: ResendHost,
    private readonly op: 'R' | 'X',
    readonly key: string,
    private readonly line: string,
    /** No attempt after this (monotonic ms); no final reply by then ends it unanswered. */
    protected readonly deadline: number,
  ) {
    super(host.wheel, true);
    this.promise = new Promise<T>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
  }

  /** The first final reply (`sentAt`: when the answered attempt was written). */
  protected abstract answered(reply: Reply, sentAt: number): void;
  /** `E perm` answering this very request: refused, and every connection would refuse it. */
  protected abstract refused(error: PermissionError): void;
  /** No final reply by the deadline. */
  protected abstract unanswered(): void;
  /** An attempt was queued on a connection (it is written at the end of this turn). */
  protected sent(): void {}

  /** Ends it (once): cancels its deadline; the subclass then settles the promise. */
  protected end(): boolean {
    if (this.done) return false;
    this.done = true;
    this.cancelDeadline();
    return true;
  }

  /** Sends on a usable connection not carrying it yet, if any; the next attempt is due after the wait. */
  protected step(t = now()): void {
    if (this.done) return;
    const inFlight = this.inFlight;
    const conn = inFlight.length === 0 ? this.host.pool.pick() : this.host.pool.pick((c) => !inFlight.includes(c));
    if (conn !== undefined) {
      inFlight.push(conn);
      conn.send(this.op, this.key, this.line, 0, this);
      this.sent();
    }
    // Silent so far: another connection in a while; none usable: poll.
    const wait = inFlight.length > 0 ? timing.releaseResendMs : timing.retryMs;
    this.setDeadline(Math.min(t + wait, this.deadline), t);
  }

  protected fire(): void {
    if (now() >= this.deadline) {
      if (this.end()) this.unanswered();
    } else {
      this.step();
    }
  }

  settled(p: Pending, outcome: Outcome, conn: Connection): void {
    const i = this.inFlight.indexOf(conn);
    if (i >= 0) this.inFlight.splice(i, 1);
    if (outcome.kind === 'reply') {
      if (this.end()) this.answered(outcome.reply, p.sentAt);
    } else if (outcome.kind === 'lost' && outcome.error instanceof PermissionError) {
      if (this.end()) this.refused(outcome.error);
    } else {
      if (outcome.kind === 'lost') this.lastError = outcome.error;
      this.step();
    }
  }
}

/** `R key token` (ticket.release(), broker.release(), a compensating release), for up to releaseWindowMs. */
export class Release extends Resend<ReleaseResult> {
  constructor(
    host: ResendHost,
    key: string,
    readonly token: bigint,
    t = now(),
  ) {
    super(host, 'R', key, `R ${key} ${token}\n`, t + timing.releaseWindowMs);
    host.releaseStarted();
    this.step(t);
  }

  protected answered(reply: Reply): void {
    this.host.releaseSettled();
    this.resolve(reply.op === 'R' ? 'released' : 'not-held');
  }

  protected refused(error: PermissionError): void {
    this.host.releaseSettled();
    this.reject(new PermissionError(`the release of ${this.key} (token ${this.token}) was refused: ${error.message}; nothing was released`, { cause: error }));
  }

  protected unanswered(): void {
    this.host.releaseSettled();
    this.reject(new ReleaseFailedError(this.key, this.token, { cause: this.lastError ?? this.host.pool.notReadyError() }));
  }
}

/**
 * `X key token lease` (ticket.extend()), until `deadline`. `onFirstSend` is
 * told when the first attempt is queued, a moment no later than its write
 * (from then on the server may have applied it). close() ends it at once
 * with `ClosedError`.
 */
export class Extension extends Resend<ExtendOutcome> {
  private first = true;
  private readonly onClose = (): void => {
    if (this.end()) this.reject(this.host.closeSignal.reason as Error);
  };

  constructor(
    host: ResendHost,
    key: string,
    private readonly token: bigint,
    leaseSeconds: number,
    deadline: number,
    private readonly onFirstSend: (sentAt: number) => void,
  ) {
    super(host, 'X', key, `X ${key} ${token} ${leaseSeconds}\n`, deadline);
    if (host.closeSignal.aborted) {
      this.onClose();
      return;
    }
    host.closeSignal.addEventListener('abort', this.onClose, { once: true });
    this.step();
  }

  protected override end(): boolean {
    if (!super.end()) return false;
    this.host.closeSignal.removeEventListener('abort', this.onClose);
    return true;
  }

  protected override sent(): void {
    if (!this.first) return;
    this.first = false;
    // Written at the end of this turn: from now is never later than the write.
    this.onFirstSend(now());
  }

  protected answered(reply: Reply, sentAt: number): void {
    this.resolve(reply.op === 'X' ? { kind: 'extended', sentAt } : { kind: 'gone' });
  }

  protected refused(error: PermissionError): void {
    this.reject(new PermissionError(`the extension of ${this.key} (token ${this.token}) was refused: ${error.message}; nothing was extended`, { cause: error }));
  }

  protected unanswered(): void {
    this.resolve({ kind: 'unanswered', error: this.lastError });
  }
}
