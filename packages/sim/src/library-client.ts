/**
 * Users of the official TypeScript client library on simulated hosts: the
 * real `TicketBroker` runs on the simulation's clock and network (through
 * the hooks of `@ticketing/client/internal`), so its rules — redirects,
 * re-sends after a step-down `T`, Indeterminate, release re-sends, close —
 * meet the same faults as the nodes.
 *
 * Each user loops: acquire a contended key (sometimes with the keep-alive),
 * hold it for a while (sometimes past its lease; extending it now and then),
 * release it. Every call goes into the checker's history, and every ticket
 * into the holds the exclusivity check compares: while a ticket says it is
 * valid (its lease-end signal has not fired), nobody else may hold its key.
 */
import { type ClientClock, type ClientSocket, type Transport, useClock, useTransport } from '@ticketing/client/internal';
import { CapacityError, LeaseEndedError, NoConnectionError, TicketBroker, TimeoutError, type Ticket } from '@ticketing/client';
import type { Operation } from '@ticketing/checker';
import type { Scheduler } from './scheduler.js';
import type { SimNetwork, SimSocket } from './sim-network.js';
import type { Hold } from './client-checks.js';
import { LEASE_CLOCK_RATE_ERROR } from './wire-client.js';
import { LineFramer, parseReply, WireError } from '@ticketing/protocol';


/** The longest lease these users ask for, in ms: what a node's fast clock may take off any of their leases. */
const MAX_LEASE_MS = 3_000;

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

function socketOf(s: SimSocket, extensions: ExtensionRecorder): ClientSocket {
  extensions.watch(s);
  return {
    get destroyed() {
      return s.destroyed;
    },
    get writable() {
      return s.writable;
    },
    write: (data) => (extensions.sent(s, data), s.write(data)),
    end: () => s.end(),
    destroy: () => s.destroy(),
    on: (event: string, listener: (...args: never[]) => void) => s.on(event, listener as (...args: unknown[]) => void),
  };
}

function transportFrom(net: SimNetwork, host: string, extensions: ExtensionRecorder): Transport {
  return {
    open(address, onConnected) {
      const i = address.lastIndexOf(':');
      const s = net.connect(host, address.slice(0, i), Number(address.slice(i + 1)));
      s.once('connect', onConnected);
      return socketOf(s, extensions);
    },
  };
}

/**
 * The library's extensions as the wire shows them, each `X` line its own
 * operation. Recorded here rather than per `ticket.extend()` call: the
 * library re-sends an unanswered `X` on another connection and keeps
 * extending by itself (keep-alive), and a duplicate that arrives after the
 * call returned extends the grant again, from then: only the wire sees
 * every one. Answered by the `X`/`G` matched to it (per connection, oldest
 * first for its key); unknown when its connection ends first.
 */
class ExtensionRecorder {
  private readonly pending = new Map<SimSocket, Map<string, Operation[]>>();

  constructor(
    private readonly sched: Scheduler,
    private readonly client: string,
    private readonly history: Operation[],
  ) {}

  watch(s: SimSocket): void {
    const framer = new LineFramer();
    s.on('data', (chunk: Buffer) => {
      framer.push(chunk, (buf, start, end) => {
        const reply = parseReply(buf, start, end);
        if (!(reply instanceof WireError) && (reply.op === 'X' || reply.op === 'G')) this.answered(s, reply.key, reply.op === 'X' ? 'extended' : 'not-extended');
        return true;
      });
    });
    s.on('close', () => {
      for (const list of this.pending.get(s)?.values() ?? []) for (const op of list) this.history.push(op);
      this.pending.delete(s);
    });
  }

  sent(s: SimSocket, data: string | Uint8Array): void {
    for (const line of data.toString().split('\n')) {
      const f = line.split(' ');
      if (f[0] !== 'X' || f.length !== 4) continue;
      const op: Operation = {
        client: this.client,
        key: f[1]!,
        op: 'extend',
        token: BigInt(f[2]!),
        leaseMs: Number(f[3]) * 1000 * (1 - LEASE_CLOCK_RATE_ERROR),
        invokedAt: this.sched.now,
        completedAt: undefined,
        outcome: 'unknown',
      };
      const byKey = this.pending.get(s) ?? this.pending.set(s, new Map()).get(s)!;
      (byKey.get(op.key) ?? byKey.set(op.key, []).get(op.key)!).push(op);
    }
  }

  private answered(s: SimSocket, key: string, outcome: 'extended' | 'not-extended'): void {
    const op = this.pending.get(s)?.get(key)?.shift();
    if (op !== undefined) this.history.push({ ...op, completedAt: this.sched.now, outcome } as Operation);
  }

  /** The run is over: what is unanswered stays unknown. */
  close(): void {
    for (const byKey of this.pending.values()) for (const list of byKey.values()) for (const op of list) this.history.push(op);
    this.pending.clear();
  }
}

export interface LibraryClientOptions {
  readonly keys: number;
  readonly servers: readonly string[];
  /** Simulated ms during which it starts new operations. */
  readonly until: number;
  /** Its client token (an identity's, or a bare one). */
  readonly token?: string | undefined;
}

export class LibraryClient {
  private broker: TicketBroker | undefined;
  private closed = false;
  readonly holds: Hold[] = [];
  /** Calls not settled yet: close() records them as unknown (their later outcome comes too late for the history). */
  private readonly pending = new Set<Operation>();
  private readonly extensions: ExtensionRecorder;

  constructor(
    private readonly sched: Scheduler,
    private readonly net: SimNetwork,
    readonly name: string,
    private readonly history: Operation[],
    private readonly options: LibraryClientOptions,
  ) {
    this.extensions = new ExtensionRecorder(sched, name, history);
  }

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
      useTransport(transportFrom(this.net, this.name, this.extensions));
      try {
        this.broker = TicketBroker.connect([...this.options.servers], this.options.token === undefined ? {} : { token: this.options.token });
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
    for (const h of this.holds) h.to = Math.min(h.to, this.sched.now);
    for (const op of this.pending) this.history.push(op);
    this.pending.clear();
    this.extensions.close();
    void this.broker?.close().catch(() => {});
  }

  private async sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.sched.after(ms, `${this.name}: next`, resolve));
  }

  private async loop(): Promise<void> {
    const s = this.sched;
    while (!this.closed && s.scenarioNow < this.options.until) {
      const key = `k${s.int(0, this.options.keys - 1)}`;
      const keepAlive = s.chance(0.4);
      const ticket = await this.acquire(key, s.pick([0, 0, 1_000, 3_000]), s.pick([1_000, 2_000, 3_000]), keepAlive);
      if (ticket !== undefined) {
        // Hold it: mostly well inside the lease, sometimes past it (the signal must say so; with the
        // keep-alive, for several leases).
        const lease = ticket.remainingMs();
        const holdMs = keepAlive ? s.random() * lease * 3 : s.chance(0.15) ? lease + s.int(0, 500) : s.random() * lease * 0.8;
        if (!keepAlive && s.chance(0.3)) {
          // Extend it part-way through, longer or shorter.
          await this.sleep(s.random() * holdMs);
          if (this.closed) return;
          await this.extend(ticket, s.pick([1_000, 2_000, 3_000]));
        }
        await this.sleep(holdMs);
        if (this.closed) return;
        await this.release(ticket);
      }
      await this.sleep(s.random() * 60);
    }
  }

  private async acquire(key: string, waitMs: number, leaseMs: number, keepAlive: boolean): Promise<Ticket | undefined> {
    const invokedAt = this.sched.now;
    const base = { client: this.name, key, invokedAt, op: 'acquire' as const, waitMs, leaseMs: leaseMs * (1 - LEASE_CLOCK_RATE_ERROR) };
    const unknown: Operation = { ...base, completedAt: undefined, outcome: 'unknown' };
    this.pending.add(unknown);
    try {
      const ticket = await this.broker!.acquire(key, { waitMs, leaseMs, keepAlive });
      const now = this.sched.now;
      if (!this.pending.has(unknown)) return undefined; // the run is over
      this.settle(unknown, { ...base, completedAt: now, outcome: 'granted', token: ticket.token });
      // Valid until its lease-end signal fires (extensions move it), less what a node's clock may run fast (docs/raft.md).
      const hold = { client: this.name, key, token: ticket.token, from: now, to: Infinity };
      this.holds.push(hold);
      ticket.signal.addEventListener('abort', () => {
        if (ticket.signal.reason instanceof LeaseEndedError) hold.to = Math.min(hold.to, this.sched.now - MAX_LEASE_MS * LEASE_CLOCK_RATE_ERROR);
      });
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

  /** `ticket.extend`; what it sends is recorded on the wire (ExtensionRecorder), attempt by attempt. */
  private async extend(ticket: Ticket, leaseMs: number): Promise<void> {
    await ticket.extend(leaseMs).catch(() => {}); // G or the lease ended: the signal fires; unanswered: it says so
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
