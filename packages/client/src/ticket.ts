/**
 * A granted lock. Its lease is counted conservatively from the moment the
 * acquire was written, so `remainingMs()` and `signal` never claim more time
 * than the server gave.
 */
import { LeaseEndedError, ReleasedError } from './errors.js';
import { after, cancel, now, type Timer } from './timing.js';

export type ReleaseResult = 'released' | 'not-held';

/** What a ticket needs from its broker. */
export interface TicketOwner {
  /** Releases exactly `token` of `key`, retrying for up to 5 s. */
  releaseTicket(key: string, token: bigint): Promise<ReleaseResult>;
  /** Reports a failure nobody awaits (dispose). */
  report(error: unknown): void;
}

export class Ticket implements AsyncDisposable {
  /** Created on first use of `signal`: most callers never look, and an AbortController per ticket is not free. */
  private controller: AbortController | undefined;
  private leaseTimer: Timer | undefined;
  private releasing: Promise<ReleaseResult> | undefined;
  private leaseOver = false;

  /** @internal Tickets come from `TicketBroker.acquire`. */
  constructor(
    private readonly owner: TicketOwner,
    /** The key this ticket holds. */
    readonly key: string,
    /** The fencing token: pass it to the protected resource with every write. */
    readonly token: bigint,
    private readonly leaseEndsAt: number,
  ) {}

  /** Aborts at the conservative lease end (`LeaseEndedError`) or on release (`ReleasedError`). */
  get signal(): AbortSignal {
    if (this.controller === undefined) {
      const controller = (this.controller = new AbortController());
      if (this.releasing !== undefined) this.abortReleased();
      else if (this.remainingMs() <= 0) this.abortLeaseEnded();
      else this.leaseTimer = after(this.leaseEndsAt - now(), () => this.abortLeaseEnded());
      return controller.signal;
    }
    return this.controller.signal;
  }

  private abortLeaseEnded(): void {
    // A timer may fire a fraction of a millisecond early: from here on, the lease counts as over.
    this.leaseOver = true;
    this.controller?.abort(new LeaseEndedError(this.key, `the lease of ${this.key} (token ${this.token}) has ended`));
  }

  private abortReleased(): void {
    if (this.controller?.signal.aborted === false) this.controller.abort(new ReleasedError(this.key, `${this.key} (token ${this.token}) was released`));
  }

  /** Milliseconds of lease left, counted from when the acquire was sent; 0 once it has run out. */
  remainingMs(): number {
    return this.leaseOver ? 0 : Math.max(0, this.leaseEndsAt - now());
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
