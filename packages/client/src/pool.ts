/**
 * The connection pool: one slot per configured address (two when only one is
 * given), round-robin choice among usable connections, `M` redirects, and
 * reconnection to the configured address: at once after a usable connection
 * dropped (a cluster's failover takes well under a second; at most once per
 * cycle), otherwise on the 3 s cycle, each wait drawn with +-20% jitter so
 * that clients that lost one server together do not return in lockstep.
 */
import { formatRequest } from '@ticketing/protocol';
import { Connection, type End, type Pending } from './connection.js';
import { AuthError, NoConnectionError } from './errors.js';
import { after, awaited, cancel, jittered, now, sleep, timing, type Timer } from './timing.js';
import type { Transport } from './transport.js';

/** One connection slot, as `broker.state` shows it. */
export interface ConnectionState {
  /** The address this slot was configured with (reconnects go there). */
  readonly configured: string;
  /** The address of the current connection (differs after `M host:port`); undefined while down. */
  readonly address: string | undefined;
  /** `down`: no connection now (a reconnect is scheduled unless the broker is closed). */
  readonly state: 'connecting' | 'greeting' | 'ready' | 'draining' | 'down';
  /** The server's node name from its `H` reply, while ready. */
  readonly nodeName: string | undefined;
  /** Why the last connection of this slot failed, if it did. */
  readonly lastError: Error | undefined;
}

/** What the pool tells its broker about connections (turned into broker events). */
export interface PoolListener {
  connected(event: { address: string; configured: string; nodeName: string }): void;
  disconnected(event: { address: string; configured: string; error: Error | undefined }): void;
  redirected(event: { from: string; to: string | undefined; configured: string }): void;
}

class Slot {
  conn: Connection | undefined;
  /** `M host:port` followed in a row (reset by a usable connection). */
  redirects = 0;
  reconnect: Timer | undefined;
  /** Why the last connection of this slot failed, for error messages. */
  lastError: Error | undefined;
  /** When this slot last reconnected at once after a drop (at most one per reconnect cycle). */
  quickRetryAt = -Infinity;
  /**
   * Since when redirect targets of this slot have been unreachable (undefined: the last connection
   * was usable, or no target failed). Failing over, a standby may name the dead active for a few
   * hundred ms more: the slot keeps going back to its configured address every retryMs for up to
   * reconnectMs, rather than using up its redirects in a few ms and waiting out the cycle.
   */
  bouncingSince: number | undefined;

  constructor(readonly configured: string) {}
}

export class Pool {
  private readonly slots: Slot[];
  private next = 0;
  private closed = false;
  /** waitReady calls in progress: settled by a usable connection, close(), or an auth refusal. */
  private readonly readyWaiters = new Set<{ resolve: () => void; reject: (err: Error) => void }>();
  private readonly helloLine: string;
  /** The connection picked in this tick. */

  constructor(
    addresses: readonly string[],
    private readonly transport: Transport,
    token: string | undefined,
    private readonly listener?: PoolListener,
  ) {
    const list = addresses.length === 1 ? [addresses[0]!, addresses[0]!] : addresses;
    this.slots = list.map((a) => new Slot(a));
    this.helloLine = formatRequest({ op: 'H', version: 1, clientToken: token });
    for (const slot of this.slots) this.open(slot, slot.configured);
  }

  /**
   * The next usable connection (that `accept`s), round-robin per request, each
   * slot tried once; undefined if none is usable. Each connection still writes
   * everything asked of it in one tick at once, so spreading a burst costs no
   * extra writes, and it keeps the connections working in parallel (sending a
   * whole tick's burst to one connection made them take turns).
   */
  pick(accept?: (conn: Connection) => boolean): Connection | undefined {
    for (let i = 0; i < this.slots.length; i++) {
      const slot = this.slots[this.next]!;
      this.next = (this.next + 1) % this.slots.length;
      const conn = slot.conn;
      // Not a suspect one (its server went silent on another connection): it answers its ping within
      // a round trip if the server is alive, and is dead within the busy pong deadline if not.
      if (conn?.usable && !conn.suspect && (accept === undefined || accept(conn))) return conn;
    }
    return undefined;
  }

  /** Like `pick`, polling every 200 ms until `deadline` (monotonic ms); undefined if none by then. */
  async pickBy(deadline: number, signal?: AbortSignal, accept?: (conn: Connection) => boolean): Promise<Connection | undefined> {
    for (;;) {
      const conn = this.pick(accept);
      if (conn !== undefined || this.closed) return conn;
      const left = deadline - now();
      if (left <= 0) return undefined;
      await sleep(Math.min(timing.retryMs, left), signal);
    }
  }

  /**
   * Resolves once a connection is usable; rejects after `ms` with the reason
   * none is, and at once when the server refuses our token (retrying cannot
   * help) or the broker closes.
   */
  async waitReady(ms: number): Promise<void> {
    if (this.pick() !== undefined) return;
    await new Promise<void>((resolve, reject) => {
      const waiter = {
        resolve: () => {
          timer.cancel();
          this.readyWaiters.delete(waiter);
          resolve();
        },
        reject: (err: Error) => {
          timer.cancel();
          this.readyWaiters.delete(waiter);
          reject(err);
        },
      };
      const timer = awaited(ms, () => waiter.reject(this.notReadyError(ms)));
      this.readyWaiters.add(waiter);
    });
  }

  /** A connection may be usable now: every waitReady in progress settles if one is. */
  private wakeReadyWaiters(): void {
    if (!this.slots.some((slot) => slot.conn?.usable === true && !slot.conn.suspect)) return;
    for (const w of [...this.readyWaiters]) w.resolve();
  }

  /** Rejects every waitReady in progress (close()). */
  rejectWaiters(err: Error): void {
    for (const w of [...this.readyWaiters]) w.reject(err);
  }

  /** A snapshot of every slot, in configured order. */
  snapshot(): ConnectionState[] {
    return this.slots.map((slot) => {
      const conn = slot.conn;
      const state = conn === undefined || conn.stateKind === 'closed' ? 'down' : conn.stateKind;
      return { configured: slot.configured, address: conn?.address, state, nodeName: state === 'ready' ? conn?.nodeName : undefined, lastError: slot.lastError };
    });
  }

  /** The acquires on every connection not answered yet. */
  acquiresInFlight(): Pending[] {
    return this.slots.flatMap((slot) => slot.conn?.acquiresInFlight() ?? []);
  }

  /** Some connection is half-closed (after an abort) and the server has not closed it yet. */
  get draining(): boolean {
    return this.slots.some((s) => s.conn?.draining === true);
  }

  /** Why nothing is usable: the server's auth refusal if any, else the last connection failure. */
  notReadyError(ms?: number): Error {
    const errors = this.slots.map((s) => s.lastError).filter((e) => e !== undefined);
    const auth = errors.find((e) => e instanceof AuthError);
    if (auth !== undefined) return auth;
    const within = ms === undefined ? '' : ` within ${ms} ms`;
    const addresses = [...new Set(this.slots.map((s) => s.configured))].join(', ');
    return new NoConnectionError(`no usable connection to ${addresses}${within}${errors.length > 0 ? `: ${errors.at(-1)!.message}` : ''}`, {
      cause: errors.at(-1),
    });
  }

  close(): void {
    this.closed = true;
    for (const slot of this.slots) {
      cancel(slot.reconnect);
      slot.conn?.shutdown();
    }
  }

  private open(slot: Slot, address: string): void {
    slot.reconnect = undefined;
    slot.conn = new Connection(address, this.transport, this.helloLine, {
      ready: (conn) => {
        slot.redirects = 0;
        slot.bouncingSince = undefined;
        slot.lastError = undefined;
        this.listener?.connected({ address: conn.address, configured: slot.configured, nodeName: conn.nodeName! });
        this.wakeReadyWaiters();
      },
      answered: () => this.wakeReadyWaiters(),
      closed: (conn, end) => this.onClosed(slot, conn, end),
    });
  }

  private onClosed(slot: Slot, conn: Connection, end: End): void {
    if (slot.conn !== conn) return;
    slot.conn = undefined;
    // A server silent on one connection (SIGSTOP, a frozen VM) is silent on all: check the others to it
    // at once rather than each on its own ping cycle (an idle one would take 5 s + 5 s). One that was only
    // redirected to it goes back to its own address at once: that node may be the one taking over.
    if (conn.diedSilent) {
      for (const other of this.slots) {
        const sibling = other.conn;
        if (sibling?.address !== conn.address) continue;
        if (other.configured === sibling.address || !sibling.leaveForSilentSibling()) sibling.siblingWentSilent();
      }
    }
    // Only a connection that was usable was "connected"; a failed attempt is no news.
    if (conn.wasReady) this.listener?.disconnected({ address: conn.address, configured: slot.configured, error: end.kind === 'failed' ? end.error : undefined });
    if (end.kind === 'redirect') this.listener?.redirected({ from: conn.address, to: end.address, configured: slot.configured });
    if (this.closed) return;
    if (end.kind === 'failed') slot.lastError = end.error;
    // A refused token stays refused: waitReady need not wait out its time.
    if (end.kind === 'failed' && end.error instanceof AuthError && this.pick() === undefined) this.rejectWaiters(end.error);
    if (end.kind === 'redirect' && end.address !== undefined && slot.redirects < timing.maxRedirects) {
      slot.redirects++;
      this.open(slot, end.address);
      return;
    }
    // A redirect target that cannot be reached (the active it named has just died): back to the configured
    // address, whose node may be taking over, every retryMs for at most reconnectMs (then the cycle).
    if (end.kind === 'failed' && !conn.wasReady && slot.redirects > 0 && conn.address !== slot.configured) {
      slot.bouncingSince ??= now();
      if (now() - slot.bouncingSince < timing.reconnectMs) {
        slot.redirects = 0;
        slot.reconnect = after(timing.retryMs, () => this.open(slot, slot.configured));
        return;
      }
    }
    slot.redirects = 0;
    slot.bouncingSince = undefined;
    // Our own half-close that ended cleanly is no failure: reconnect at once. A usable connection that
    // dropped (not by `M -`, which says no node is active yet) is retried at once too, since its server
    // may have failed over already: once per cycle.
    let delay = end.kind === 'drained' ? 0 : jittered(timing.reconnectMs);
    const dash = end.kind === 'redirect' && end.address === undefined;
    if (delay > 0 && conn.wasReady && !dash && now() - slot.quickRetryAt >= timing.reconnectMs) {
      slot.quickRetryAt = now();
      delay = 0;
    }
    slot.reconnect = after(delay, () => this.open(slot, slot.configured));
  }
}
