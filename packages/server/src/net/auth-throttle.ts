/**
 * Failed client authentications (`H` with a wrong token), per source
 * address: a token bucket of BURST failures refilled at one per second, so
 * guessing runs at one try a second per address instead of as fast as
 * connections open. Once an address has used its budget, its `H` is refused
 * without comparing the token at all (a comparison would still answer the
 * guess). A client on the same address with the right token waits too: that
 * is the price of not being an oracle. Failures are logged at warn with
 * their count, at most once per LOG_EVERY_MS per address.
 */
import type { Logger } from 'pino';
import type { Clock } from '../seams/clock.js';

/** Failed attempts an address may make at once before it is throttled. */
export const AUTH_FAILURE_BURST = 10;
/** Failed attempts per second an address may sustain. */
const REFILL_PER_MS = 1 / 1_000;
const LOG_EVERY_MS = 10_000;
/** Addresses tracked at most (the oldest is forgotten first): memory stays bounded under a spoofed flood. */
const MAX_ADDRESSES = 10_000;

interface Budget {
  tokens: number;
  refilledAt: number;
  /** Failures not logged yet, and when the last log line for this address was. */
  unlogged: number;
  loggedAt: number;
}

export class AuthThrottle {
  private readonly budgets = new Map<string, Budget>();

  constructor(
    private readonly clock: Clock,
    private readonly logger: Logger,
    /** Counts every failure (metrics). */
    private readonly onFailure: () => void = () => {},
  ) {}

  private budget(address: string): Budget {
    const now = this.clock.now();
    let b = this.budgets.get(address);
    if (b === undefined) {
      if (this.budgets.size >= MAX_ADDRESSES) this.budgets.delete(this.budgets.keys().next().value!);
      b = { tokens: AUTH_FAILURE_BURST, refilledAt: now, unlogged: 0, loggedAt: -Infinity };
      this.budgets.set(address, b);
    }
    b.tokens = Math.min(AUTH_FAILURE_BURST, b.tokens + (now - b.refilledAt) * REFILL_PER_MS);
    b.refilledAt = now;
    return b;
  }

  /** False: `address` has used its budget of failures; refuse its `H` without looking at the token. */
  allow(address: string | undefined): boolean {
    const b = this.budgets.get(address ?? '?');
    if (b === undefined) return true;
    if (this.budget(address ?? '?').tokens >= 1) return true;
    this.note(address ?? '?', b);
    return false;
  }

  /** An `H` from `address` carried a wrong token. */
  failed(address: string | undefined): void {
    const b = this.budget(address ?? '?');
    b.tokens = Math.max(0, b.tokens - 1);
    this.note(address ?? '?', b);
  }

  private note(address: string, b: Budget): void {
    this.onFailure();
    b.unlogged++;
    const now = this.clock.now();
    if (now - b.loggedAt < LOG_EVERY_MS) return;
    this.logger.warn({ remote: address, failures: b.unlogged, throttled: b.tokens < 1 }, 'failed client authentication (wrong client token)');
    b.unlogged = 0;
    b.loggedAt = now;
  }
}
