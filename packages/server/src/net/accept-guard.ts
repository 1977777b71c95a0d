/**
 * Counts every connection a listener holds open, from the moment it is
 * accepted (before a TLS handshake, before `H`) until it closes, in all and
 * per source address, so that neither handshakes in progress nor silent
 * connections escape the limits. It also sheds load when the process runs
 * out of file descriptors: an accept that fails with EMFILE (or ENFILE)
 * makes the listener close new connections at once for a moment, then take
 * them again.
 */
import type { Logger } from 'pino';
import type { Clock } from '../seams/clock.js';

export interface AcceptLimits {
  /** Connections served at most (read at each accept: a reload may change it). */
  readonly maxConns: () => number;
  /** Connections from one source address at most. */
  readonly maxPerAddress: () => number;
}

/** How long new connections are closed at once after the process ran out of file descriptors. */
export const SHED_MS = 1_000;
/**
 * Connections beyond the limits are answered `E unavailable` (plain TCP)
 * while they stay under this many times the limit; past it they are closed
 * at once without a word, so that a flood of refusals cannot pile up either.
 */
const HARD_FACTOR = 2;

export class AcceptGuard {
  private total = 0;
  private readonly perAddress = new Map<string, number>();
  private shedUntil = 0;
  /** Accept failures (EMFILE, ENFILE, ...) since start, for /metrics. */
  acceptErrors = 0;

  constructor(
    private readonly limits: AcceptLimits,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly what: string,
  ) {}

  /** Connections open now (handshaking, unauthenticated and serving). */
  get open(): number {
    return this.total;
  }

  /** The transport's admit hook: counts a new connection, or refuses it outright (undefined). */
  readonly admit = (remote: string | undefined): (() => void) | undefined => {
    if (this.clock.now() < this.shedUntil) return undefined;
    const address = remote ?? '?';
    const mine = this.perAddress.get(address) ?? 0;
    if (this.total >= HARD_FACTOR * this.limits.maxConns() || mine >= HARD_FACTOR * this.limits.maxPerAddress()) return undefined;
    this.total++;
    this.perAddress.set(address, mine + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total--;
      const left = (this.perAddress.get(address) ?? 1) - 1;
      if (left === 0) this.perAddress.delete(address);
      else this.perAddress.set(address, left);
    };
  };

  /** Why a connection just admitted (and counted) must be refused, or undefined when it may be served. */
  refusal(remote: string | undefined): string | undefined {
    if (this.total > this.limits.maxConns()) return 'too many connections; try later or another node';
    if ((this.perAddress.get(remote ?? '?') ?? 0) > this.limits.maxPerAddress()) return 'too many connections from this address';
    return undefined;
  }

  /** The listener's 'error' hook. */
  readonly onError = (err: Error): void => {
    this.acceptErrors++;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EMFILE' || code === 'ENFILE') {
      const shedding = this.clock.now() < this.shedUntil;
      this.shedUntil = this.clock.now() + SHED_MS;
      if (!shedding) {
        this.logger.error(
          { err, listener: this.what, open: this.total, pauseMs: SHED_MS },
          'out of file descriptors: closing new connections at once for a moment (raise ulimit -n, or lower max-conns)',
        );
      }
      return;
    }
    this.logger.error({ err, listener: this.what }, 'listener error; still listening');
  };
}
