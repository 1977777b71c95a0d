/**
 * A granted lock. Its lease is counted conservatively from the moment the
 * acquire was written (and, after an extension, from the moment that `X`
 * was written), so `remainingMs()` and `signal` never claim more time than
 * the server gave.
 */
import { IndeterminateError, LeaseEndedError, ReleasedError } from './errors.js';
import { checkLeaseMs } from './options.js';
import { after, cancel, conservativeLeaseMs, now, timing, type Timer } from './timing.js';

export type ReleaseResult = 'released' | 'not-held';

/** What became of an extension: `X` (with when the answered attempt was written), `G`, or no final reply in time. */
export type ExtendOutcome =
  | { readonly kind: 'extended'; readonly sentAt: number }
  | { readonly kind: 'gone' }
  | { readonly kind: 'unanswered'; readonly error: Error | undefined };

/** What a ticket needs from its broker. */
export interface TicketOwner {
  /** Releases exactly `token` of `key`, retrying for up to 5 s. */
  releaseTicket(key: string, token: bigint): Promise<ReleaseResult>;
  /** Extends exactly `token` of `key`, retrying until `deadline`; `onFirstSend` when the first `X` is written. */
  extendTicket(key: string, token: bigint, leaseSeconds: number, deadline: number, onFirstSend: (sentAt: number) => void): Promise<ExtendOutcome>;
  /** Reports a failure nobody awaits (dispose, keep-alive). */
  report(error: unknown): void;
}

export class Ticket implements AsyncDisposable {
  /** Created on first use of `signal` (or by the keep-alive): most callers never look, and an AbortController per ticket is not free. */
  private controller: AbortController | undefined;
  private leaseTimer: Timer | undefined;
  private keepAliveTimer: Timer | undefined;
  private releasing: Promise<ReleaseResult> | undefined;
  private leaseOver = false;
  /** The extension in progress (extensions of one ticket run one after another). */
  private extending: Promise<unknown> | undefined;

  /** @internal Tickets come from `TicketBroker.acquire`. */
  constructor(
    private readonly owner: TicketOwner,
    /** The key this ticket holds. */
    readonly key: string,
    /** The fencing token: pass it to the protected resource with every write. */
    readonly token: bigint,
    /** The conservative lease end (monotonic ms); moved by extensions. */
    private leaseEndsAt: number,
    /** The lease last granted or extended by, in whole seconds (the keep-alive extends by it). */
    private leaseSeconds = 0,
    /** Extend by itself at a third of the lease (the acquire's `keepAlive`). */
    private readonly keepAliveOn = false,
  ) {
    if (keepAliveOn) {
      // The keep-alive must fire the signal when it cannot extend in time, whoever looks at it.
      void this.signal;
      this.scheduleKeepAlive(leaseEndsAt - conservativeLeaseMs(leaseSeconds));
    }
  }

  /** Aborts at the conservative lease end (`LeaseEndedError`) or on release (`ReleasedError`). */
  get signal(): AbortSignal {
    if (this.controller === undefined) {
      const controller = (this.controller = new AbortController());
      if (this.releasing !== undefined) this.abortReleased();
      else this.armLeaseTimer();
      return controller.signal;
    }
    return this.controller.signal;
  }

  /** (Re-)arms the lease-end timer for the current end, if someone holds the signal. */
  private armLeaseTimer(): void {
    if (this.controller === undefined || this.controller.signal.aborted) return;
    cancel(this.leaseTimer);
    if (this.remainingMs() <= 0) this.abortLeaseEnded();
    else this.leaseTimer = after(this.leaseEndsAt - now(), () => this.onLeaseTimer());
  }

  /** A timer may fire early or late: only an end that has really passed counts. */
  private onLeaseTimer(): void {
    if (now() < this.leaseEndsAt) this.armLeaseTimer();
    else this.abortLeaseEnded();
  }

  private abortLeaseEnded(): void {
    // A timer may fire a fraction of a millisecond early: from here on, the lease counts as over.
    this.leaseOver = true;
    cancel(this.leaseTimer);
    cancel(this.keepAliveTimer);
    this.controller?.abort(this.leaseEndedError());
  }

  private leaseEndedError(): LeaseEndedError {
    return new LeaseEndedError(this.key, `the lease of ${this.key} (token ${this.token}) has ended`);
  }

  private abortReleased(): void {
    if (this.controller?.signal.aborted === false) this.controller.abort(new ReleasedError(this.key, `${this.key} (token ${this.token}) was released`));
  }

  /** Milliseconds of lease left, counted from when the acquire (or the last extension) was sent; 0 once it has run out. */
  remainingMs(): number {
    return this.leaseOver ? 0 : Math.max(0, this.leaseEndsAt - now());
  }

  /**
   * Extends exactly this grant: its lease becomes `leaseMs` (rounded up to
   * whole seconds, 1..250 s) from when the server receives the `X`; it may
   * also shorten it. Resolves with the new conservative remaining time,
   * counted from when the answered `X` was written. Retried on another
   * connection like a release, until 5 s after the call or the lease end,
   * whichever is first. Rejects with `LeaseEndedError` when the grant is
   * gone (`G`, or the lease ended first; the signal fires),
   * `IndeterminateError` when no attempt got a final reply in time (the
   * ticket then counts with the earlier of its old end and the new one),
   * `ReleasedError` after `release()`. Extensions of one ticket run one
   * after another.
   */
  async extend(leaseMs: number): Promise<number> {
    const leaseSeconds = checkLeaseMs('leaseMs', leaseMs);
    const previous = this.extending;
    const run = (async () => {
      if (previous !== undefined) await previous.catch(() => {});
      return this.extendNow(leaseSeconds);
    })();
    this.extending = run;
    try {
      return await run;
    } finally {
      if (this.extending === run) this.extending = undefined;
    }
  }

  private async extendNow(leaseSeconds: number): Promise<number> {
    if (this.releasing !== undefined) throw new ReleasedError(this.key, `${this.key} (token ${this.token}) was released; it cannot be extended`);
    if (this.remainingMs() <= 0) {
      this.abortLeaseEnded();
      throw this.leaseEndedError();
    }
    // The end counts the conservative lease (less the clock-rate allowance), as an acquire's does.
    const leaseMs = conservativeLeaseMs(leaseSeconds);
    const calledAt = now();
    // Never past the lease: an extension cannot revive a grant the client must count as lost.
    const deadline = Math.min(calledAt + timing.releaseWindowMs, this.leaseEndsAt, calledAt + leaseMs);
    const outcome = await this.owner.extendTicket(this.key, this.token, leaseSeconds, deadline, (sentAt) => {
      // The server may apply it from now on: a shorter lease counts at once.
      this.moveEnd(Math.min(this.leaseEndsAt, sentAt + leaseMs));
    });
    if (this.releasing !== undefined) throw new ReleasedError(this.key, `${this.key} (token ${this.token}) was released while it was being extended`);
    if (outcome.kind === 'gone') {
      this.abortLeaseEnded();
      throw new LeaseEndedError(this.key, `${this.key} (token ${this.token}) is no longer held (G): its lease ran out or it was released`);
    }
    if (outcome.kind === 'extended' && !this.leaseOver) {
      this.leaseSeconds = leaseSeconds;
      this.moveEnd(outcome.sentAt + leaseMs);
      if (this.keepAliveOn) this.scheduleKeepAlive(outcome.sentAt);
      if (this.remainingMs() > 0) return this.remainingMs();
    }
    // Unanswered by the lease end (not the window): the lease counts as over now (a timer may fire a hair early).
    if (this.remainingMs() <= 0 || (outcome.kind === 'unanswered' && deadline < calledAt + timing.releaseWindowMs)) {
      this.abortLeaseEnded();
      throw new LeaseEndedError(this.key, `the lease of ${this.key} (token ${this.token}) ended before its extension was confirmed`, { cause: outcome.kind === 'unanswered' ? outcome.error : undefined });
    }
    throw new IndeterminateError(this.key, `no reply to the extension of ${this.key} (token ${this.token}) in time; it may or may not have taken effect, and the ticket counts with the earlier end`, {
      cause: outcome.kind === 'unanswered' ? outcome.error : undefined,
    });
  }

  /** The conservative end moved (an extension): the signal and the keep-alive follow it. */
  private moveEnd(end: number): void {
    if (this.leaseOver) return;
    this.leaseEndsAt = end;
    this.armLeaseTimer();
  }

  /** Keep-alive: extend once a third of the lease that began at `start` (a send) has passed. */
  private scheduleKeepAlive(start: number): void {
    cancel(this.keepAliveTimer);
    if (this.leaseOver || this.releasing !== undefined) return;
    this.keepAliveTimer = after(start + (this.leaseSeconds * 1000) / 3 - now(), () => void this.keepAlive());
  }

  /** Extends by the current lease; an answered extension schedules the next (extendNow). */
  private async keepAlive(): Promise<void> {
    // After a pause past the lease the ticket is over: nothing is sent (see extendNow).
    while (!this.leaseOver && this.releasing === undefined) {
      try {
        await this.extend(this.leaseSeconds * 1000);
        return;
      } catch (err) {
        // Lease ended or released: the signal says so. Unanswered in time: try again while the lease runs.
        if (!(err instanceof IndeterminateError)) return;
      }
    }
  }

  /**
   * Releases exactly this grant: `'released'` (`R`), or `'not-held'` (`N`:
   * the token is not current, e.g. the lease ran out). Rejects with
   * `ReleaseFailedError` when no attempt got a final reply within 5 s.
   * Calling it again returns the first call's promise (the same object,
   * hence not an async function).
   */
  // eslint-disable-next-line @typescript-eslint/promise-function-async
  release(): Promise<ReleaseResult> {
    if (this.releasing === undefined) {
      cancel(this.leaseTimer);
      cancel(this.keepAliveTimer);
      this.abortReleased();
      this.releasing = this.owner.releaseTicket(this.key, this.token);
    }
    return this.releasing;
  }

  /** `await using`: a bounded best-effort release that never throws; failures go to the broker's 'error' event. */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.releasing !== undefined) return;
    try {
      await this.release();
    } catch (err) {
      this.owner.report(err);
    }
  }
}
