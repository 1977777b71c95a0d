/**
 * Users of the official TypeScript client library on simulated hosts: the
 * real `TicketBroker` runs on the simulation's clock and network (through
 * the hooks of `@ticketing/client/internal`), so its rules — redirects,
 * re-sends after a step-down `T`, Indeterminate, release re-sends, close —
 * meet the same faults as the nodes.
 *
 * Each user loops: acquire a contended key, hold it for a while (sometimes
 * past its lease), release it. Every call goes into the checker's history,
 * and every ticket into the holds the exclusivity check compares: while a
 * ticket says it is valid, nobody else may hold its key.
 */
import { type ClientClock, type ClientSocket, type Transport, useClock, useTransport } from '@ticketing/client/internal';
import { CapacityError, NoConnectionError, TicketBroker, TimeoutError, type Ticket } from '@ticketing/client';
import type { Operation } from '@ticketing/checker';
import type { Scheduler } from './scheduler.js';
import type { SimNetwork, SimSocket } from './sim-network.js';
import type { Hold } from './client-checks.js';
import { LEASE_CLOCK_RATE_ERROR } from './wire-client.js';


/** Runs every client library made from now on on simulated time; returns what ends it (see there). */
export function simulateClientClock(sched: Scheduler): () => void {
  const clock: ClientClock = {
    now: () => sched.now,
    setTimer: (ms, fn) => sched.after(ms, 'client timer', fn),
    clearTimer: (handle) => {
      (handle as { cancelled: boolean }).cancelled = true;
    },
  };
  useClock(clock);
  // Afterwards, not the process's clock: a finished run's brokers may still have work queued
  // (close() waits for releases), and a timer they set later would land in the next run's
  // scheduler (one process runs seed after seed). Their time stops instead.
  const end = sched.now;
  return () => useClock({ now: () => end, setTimer: () => undefined, clearTimer: () => {} });
}

function socketOf(s: SimSocket): ClientSocket {
  return {
    get destroyed() {
      return s.destroyed;
    },
    get writable() {
      return s.writable;
    },
    write: (data) => s.write(data),
    end: () => s.end(),
    destroy: () => s.destroy(),
    on: (event: string, listener: (...args: never[]) => void) => s.on(event, listener as (...args: unknown[]) => void),
  };
}

function transportFrom(net: SimNetwork, host: string): Transport {
  return {
    open(address, onConnected) {
      const i = address.lastIndexOf(':');
      const s = net.connect(host, address.slice(0, i), Number(address.slice(i + 1)));
      s.once('connect', onConnected);
      return socketOf(s);
    },
  };
}

export interface LibraryClientOptions {
  readonly keys: number;
  readonly servers: readonly string[];
  /** Simulated ms during which it starts new operations. */
  readonly until: number;
}

export class LibraryClient {
  private broker: TicketBroker | undefined;
  private closed = false;
  readonly holds: Hold[] = [];
  /** Calls not settled yet: close() records them as unknown (their later outcome comes too late for the history). */
  private readonly pending = new Set<Operation>();

  constructor(
    private readonly sched: Scheduler,
    private readonly net: SimNetwork,
    readonly name: string,
    private readonly history: Operation[],
    private readonly options: LibraryClientOptions,
  ) {}

  get inFlight(): number {
    return this.pending.size;
  }

  /** Records the outcome of the call `unknown` stands for, unless close() recorded it as unknown already. */
  private settle(unknown: Operation, outcome: Operation | undefined): void {
    if (this.pending.delete(unknown) && outcome !== undefined) this.history.push(outcome);
  }

  start(): void {
    // After the first election: a broker that meets only "no leader yet" redirects waits out the
    // 3 s reconnect cycle (CLIENT.md), most of a run.
    this.sched.after(500 + this.sched.random() * 300, `${this.name}: start`, () => {
      useTransport(transportFrom(this.net, this.name));
      try {
        this.broker = TicketBroker.connect([...this.options.servers]);
      } finally {
        useTransport(undefined);
      }
      this.broker.on('error', () => {}); // reported failures nobody awaits: the history has what matters
      this.broker.on('connected', (e) => this.sched.note(`${this.name}: connected to ${e.address} (${e.nodeName})`));
      this.broker.on('disconnected', (e) => this.sched.note(`${this.name}: lost ${e.address}${e.error === undefined ? '' : `: ${e.error.message}`}`));
      this.broker.on('redirected', (e) => this.sched.note(`${this.name}: ${e.from} redirected to ${e.to ?? '-'}`));
      void this.loop();
    });
  }

  /** Closes the broker (the run is over): what it leaves unanswered stays unknown in the history. */
  close(): void {
    this.closed = true;
    for (const op of this.pending) this.history.push(op);
    this.pending.clear();
    void this.broker?.close().catch(() => {});
  }

  private async sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.sched.after(ms, `${this.name}: next`, resolve));
  }

  private async loop(): Promise<void> {
    const s = this.sched;
    while (!this.closed && s.now < this.options.until) {
      const key = `k${s.int(0, this.options.keys - 1)}`;
      const ticket = await this.acquire(key, s.pick([0, 0, 1_000, 3_000]), s.pick([1_000, 2_000, 3_000]));
      if (ticket !== undefined) {
        // Hold it: mostly well inside the lease, sometimes past it (the signal must say so).
        const holdMs = s.chance(0.15) ? ticket.remainingMs() + s.int(0, 500) : s.random() * ticket.remainingMs() * 0.8;
        await this.sleep(holdMs);
        if (this.closed) return;
        await this.release(ticket);
      }
      await this.sleep(s.random() * 60);
    }
  }

  private async acquire(key: string, waitMs: number, leaseMs: number): Promise<Ticket | undefined> {
    const invokedAt = this.sched.now;
    const base = { client: this.name, key, invokedAt, op: 'acquire' as const, waitMs, leaseMs: leaseMs * (1 - LEASE_CLOCK_RATE_ERROR) };
    const unknown: Operation = { ...base, completedAt: undefined, outcome: 'unknown' };
    this.pending.add(unknown);
    try {
      const ticket = await this.broker!.acquire(key, { waitMs, leaseMs });
      const now = this.sched.now;
      if (!this.pending.has(unknown)) return undefined; // the run is over
      this.settle(unknown, { ...base, completedAt: now, outcome: 'granted', token: ticket.token });
      // The ticket's own lease end, less what a node's clock may run fast (docs/raft.md).
      const to = now + ticket.remainingMs() - leaseMs * LEASE_CLOCK_RATE_ERROR;
      this.holds.push({ client: this.name, key, token: ticket.token, from: now, to });
      return ticket;
    } catch (err) {
      const now = this.sched.now;
      if (err instanceof TimeoutError) this.settle(unknown, { ...base, completedAt: now, outcome: 'timeout' });
      else if (err instanceof CapacityError) this.settle(unknown, { ...base, completedAt: now, outcome: 'busy' });
      else if (!(err instanceof NoConnectionError)) this.settle(unknown, unknown);
      else {
        this.settle(unknown, undefined); // nothing was sent: no operation
        await this.broker!.waitReady(2_000).catch(() => {});
      }
      return undefined;
    }
  }

  private async release(ticket: Ticket): Promise<void> {
    const invokedAt = this.sched.now;
    const hold = this.holds.findLast((h) => h.token === ticket.token);
    if (hold !== undefined) hold.to = Math.min(hold.to, invokedAt);
    const base = { client: this.name, key: ticket.key, invokedAt, op: 'release' as const, token: ticket.token };
    const unknown: Operation = { ...base, completedAt: undefined, outcome: 'unknown' };
    this.pending.add(unknown);
    try {
      const result = await ticket.release();
      // 'not-held' includes "an earlier attempt released it and its reply was lost" (CLIENT.md: a
      // release is re-sent on another connection after 500 ms): it may or may not have taken effect.
      this.settle(unknown, result === 'released' ? { ...base, completedAt: this.sched.now, outcome: 'released' } : unknown);
    } catch {
      this.settle(unknown, unknown);
    }
  }
}
