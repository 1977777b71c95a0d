/**
 * `TicketBroker`: the public face of the client. Acquire and release follow
 * CLIENT.md to the letter: never re-send an acquire whose outcome is unknown,
 * never call an unanswered release a success, and never hand out a ticket
 * without the lease the caller asked to work with.
 */
import { EventEmitter } from 'node:events';
import { MAX_TOKEN, MIN_TOKEN } from '@ticketing/protocol';
import { Acquire, type AcquireHost } from './acquire.js';
import { ClosedError, InvalidArgumentError } from './errors.js';
import {
  checkAcquire,
  checkAddresses,
  checkBrokerOptions,
  checkKey,
  checkTimeoutMs,
  mergeUrlOptions,
  type AcquireOptions,
  type AcquireRequest,
  type BrokerOptions,
} from './options.js';
import { Pool, type ConnectionState } from './pool.js';
import { Ticket, type ExtendOutcome, type ReleaseResult, type TicketOwner } from './ticket.js';
import { Extension, Release } from './resend.js';
import { now, sleep, timing } from './timing.js';
import { makeTransport } from './transport.js';
import { Wheel } from './wheel.js';

export interface BrokerEvents {
  /** A failure no caller awaits: a release from `await using`/`using()`, or a compensating release. */
  error: [error: Error];
  /** A connection became usable (its `H` was answered). `address` differs from `configured` after a redirect. */
  connected: [event: { address: string; configured: string; nodeName: string }];
  /** A usable connection ended; `error` says why (undefined for a redirect, our own half-close or close()). */
  disconnected: [event: { address: string; configured: string; error: Error | undefined }];
  /** A node answered `M`: `to` is the address it named (undefined for `M -`); the connection was dropped. */
  redirected: [event: { from: string; to: string | undefined; configured: string }];
}

/** `broker.state`: a snapshot of the broker and its connections. */
export interface BrokerState {
  /** close() was called. */
  readonly closed: boolean;
  /** How many connections are usable now. */
  readonly usable: number;
  /** One entry per connection slot (two for a single address), in configured order. */
  readonly connections: readonly ConnectionState[];
}

export class TicketBroker extends EventEmitter<BrokerEvents> implements TicketOwner {
  private readonly pool: Pool;
  private closing: Promise<void> | undefined;
  /** Releases in flight (compensations included): close() waits for them. */
  private releasesInFlight = 0;
  /** close() waiting for the releases in flight: called when the last one settles. */
  private releasesSettled: (() => void) | undefined;
  /** Aborted by close(): ends waits between attempts (a re-send looking for a connection) at once. */
  private readonly closeController = new AbortController();
  /** What acquires, releases and extensions use: the connections, the wheel for deadlines, ... */
  private readonly host: AcquireHost;

  private constructor(addresses: string[], options: BrokerOptions | undefined) {
    super();
    const { token, tls } = checkBrokerOptions(options);
    this.pool = new Pool(addresses, makeTransport(tls), token, {
      connected: (e) => this.notify('connected', e),
      disconnected: (e) => this.notify('disconnected', e),
      redirected: (e) => this.notify('redirected', e),
    });
    const isClosing = () => this.closing !== undefined;
    this.host = {
      pool: this.pool,
      wheel: new Wheel(),
      closeSignal: this.closeController.signal,
      releaseStarted: () => this.releasesInFlight++,
      releaseSettled: () => {
        if (--this.releasesInFlight > 0) return;
        const wake = this.releasesSettled;
        this.releasesSettled = undefined;
        wake?.();
      },
      get closed() {
        return isClosing();
      },
      compensate: (key, token) => this.compensate(key, token),
      ticketOwner: this,
    };
  }

  /** Emits a connection-state event; a listener that throws is reported, never let into the connection code. */
  private notify(event: 'connected' | 'disconnected' | 'redirected', payload: object): void {
    try {
      (this.emit as (event: string, payload: object) => boolean)(event, payload);
    } catch (err) {
      this.report(err);
    }
  }

  /** A snapshot of the connections: what each slot is doing now, and why the last one failed. */
  get state(): BrokerState {
    const connections = this.pool.snapshot();
    return { closed: this.closing !== undefined, usable: connections.filter((c) => c.state === 'ready').length, connections };
  }

  /**
   * Starts connecting in the background: one connection per address, two when
   * only one is given. `addresses` may be a `ticketing://token@host:port,host:port?tls=system`
   * URL. Throws `InvalidArgumentError` for a bad address or option.
   */
  static connect(addresses: string | readonly string[], options?: BrokerOptions): TicketBroker {
    const target = checkAddresses(addresses);
    return new TicketBroker(target.addresses, mergeUrlOptions(target, options));
  }

  /** Resolves once a connection is usable (its `H` answered); rejects after `ms` with `NoConnectionError` or `AuthError`. */
  async waitReady(ms: number): Promise<void> {
    checkTimeoutMs('waitReady timeout', ms);
    this.checkOpen();
    await this.pool.waitReady(ms);
  }

  /** Acquires `key`. See docs/client.md for every outcome. */
  // eslint-disable-next-line @typescript-eslint/promise-function-async -- one promise per acquire: the Acquire's own
  acquire(key: string, options: AcquireOptions): Promise<Ticket> {
    let req: AcquireRequest;
    try {
      req = checkAcquire(key, options);
      this.checkOpen();
      req.signal?.throwIfAborted();
    } catch (err) {
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- signal.reason is whatever the caller aborted with
      return Promise.reject(err);
    }
    const conn = this.pool.pick();
    if (conn === undefined) return Promise.reject(this.pool.notReadyError());
    return new Acquire(this.host, req, conn).promise;
  }

  /**
   * Acquires `key`, runs `fn(ticket, signal)`, then releases (never throwing
   * for the release; see 'error'). `signal` aborts at the lease end, on
   * release, or when `options.signal` aborts.
   */
  async using<T>(key: string, options: AcquireOptions, fn: (ticket: Ticket, signal: AbortSignal) => Promise<T> | T): Promise<T> {
    await using ticket = await this.acquire(key, options);
    const signal = options.signal === undefined ? ticket.signal : AbortSignal.any([ticket.signal, options.signal]);
    return await fn(ticket, signal);
  }

  /**
   * Rejects acquires in progress with `ClosedError`, waits (at most 5 s) for
   * releases in flight, then closes every connection. Tickets still held are
   * left to their leases. Later calls reject with `ClosedError`.
   */
  async close(): Promise<void> {
    this.closing ??= (async () => {
      const closed = new ClosedError('the broker was closed');
      this.closeController.abort(closed);
      this.pool.rejectWaiters(closed);
      // Like an abort: FIN on each connection with a waiting acquire, so the
      // server drops those waiters; a grant that crossed the FIN is released
      // by its exact token (on a connection the pool still keeps up).
      for (const p of this.pool.acquiresInFlight()) (p.owner as Acquire).abort(closed, true);
      // Until those connections are closed by the server and every release
      // (compensations included) is settled, at most releaseWindowMs.
      const deadline = now() + timing.releaseWindowMs;
      while ((this.releasesInFlight > 0 || this.pool.draining) && now() < deadline) {
        // (Polls the drain; the last release settling ends the wait early.)
        const tick = sleep(Math.min(20, Math.max(0, deadline - now())));
        await (this.releasesInFlight > 0 ? Promise.race([new Promise<void>((resolve) => (this.releasesSettled = resolve)), tick]) : tick);
      }
      this.pool.close();
    })();
    return this.closing;
  }

  /**
   * Releases exactly `token` of `key` (what `ticket.release()` does), for a
   * token kept elsewhere: retried on any connection until 5 s after the call.
   */
  async release(key: string, token: bigint): Promise<ReleaseResult> {
    checkKey(key);
    if (typeof token !== 'bigint' || token < MIN_TOKEN || token > MAX_TOKEN) {
      throw new InvalidArgumentError(`token must be a bigint 1..${MAX_TOKEN}, got ${String(token)}`);
    }
    return this.releaseTicket(key, token);
  }

  /** @internal `ticket.release()`: the key and token are known good. */
  // eslint-disable-next-line @typescript-eslint/promise-function-async -- one promise per release: the Release's own
  releaseTicket(key: string, token: bigint): Promise<ReleaseResult> {
    if (this.closing !== undefined) return Promise.reject(new ClosedError('the broker was closed'));
    return new Release(this.host, key, token).promise;
  }

  /** @internal */
  report(error: unknown): void {
    const err = error instanceof Error ? error : new Error(String(error));
    if (this.listenerCount('error') > 0) this.emit('error', err);
    else process.emitWarning(err.message, { type: 'TicketingWarning', code: 'code' in err ? String(err.code) : undefined });
  }

  private checkOpen(): void {
    if (this.closing !== undefined) throw new ClosedError('the broker was closed');
  }

  /** Releases a grant nobody will use, in the background; a failure goes to 'error'. */
  private compensate(key: string, token: bigint): void {
    new Release(this.host, key, token).promise.catch((err: unknown) => this.report(err));
  }

  /**
   * @internal `ticket.extend()`: sends `X key token lease` until a final reply
   * (`X` or `G`) or `deadline`, the same way as a release (see Extension).
   */
  async extendTicket(key: string, token: bigint, leaseSeconds: number, deadline: number, onFirstSend: (sentAt: number) => void): Promise<ExtendOutcome> {
    this.checkOpen();
    return new Extension(this.host, key, token, leaseSeconds, deadline, onFirstSend).promise;
  }
}

