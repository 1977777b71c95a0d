/**
 * Simulated clients: each on its own host, with one connection at a time to
 * a node it chooses (following `M` redirects), issuing a random mix that
 * finds bugs: contended keys, pipelined acquires of one key on one
 * connection, waits that run out, releases with stale tokens, locks left to
 * expire, extensions (longer and shorter, late ones after the lease ran out,
 * of stale tokens), aborts (FIN) and resets, reconnects. Pipelining clients
 * keep many acquires of their own keys in flight at once.
 */
import type { ExtendOp, Operation } from '@ticketing/checker';
import type { Scheduler } from './scheduler.js';
import type { SimNetwork } from './sim-network.js';
import type { Hold } from './client-checks.js';
import { LibraryClient } from './library-client.js';
import { WireConnection, type Outcome } from './wire-client.js';

export interface WorkloadOptions {
  readonly clients: number;
  /**
   * Clients that pipeline many acquires of distinct keys on one connection (a
   * worker pool sharing it): they keep a leader's log busy, so a leader cut
   * off from the others is left with a long tail of uncommitted entries.
   */
  readonly pipeliningClients: number;
  /** Users of the official TypeScript client library, beside the raw protocol clients. */
  readonly libraryClients: number;
  readonly keys: number;
  /** Node client addresses to pick from. */
  readonly servers: readonly string[];
  /** Simulated ms during which clients start new operations. */
  readonly until: number;
  /** Client tokens the clients take turns with (one per client, for all its connections); none: no H. */
  readonly tokens?: readonly string[];
}

export class Workload {
  readonly history: Operation[] = [];
  /** The raw clients' releases and extensions sent and not answered yet: a hold ends or shrinks at their send. */
  readonly unsettled = new Set<Operation>();
  private readonly clients: SimClient[] = [];
  private readonly libraryClients: LibraryClient[] = [];
  private running = true;

  constructor(
    readonly sched: Scheduler,
    readonly net: SimNetwork,
    readonly options: WorkloadOptions,
  ) {
    const contended = Array.from({ length: options.keys }, (_, i) => `k${i}`);
    const tokens = options.tokens ?? [];
    let turn = 0;
    const token = () => (tokens.length === 0 ? undefined : tokens[turn++ % tokens.length]);
    for (let i = 0; i < options.clients; i++) this.clients.push(new SimClient(this, `c${i + 1}`, { keys: contended, maxUnanswered: 4, paceMs: 150, token: token() }));
    for (let i = 0; i < options.pipeliningClients; i++) {
      const keys = Array.from({ length: PIPELINED_KEYS }, (_, k) => `p${i + 1}-${k}`);
      this.clients.push(new SimClient(this, `p${i + 1}`, { keys, maxUnanswered: PIPELINED_KEYS, paceMs: 10, token: token() }));
    }
    for (let i = 0; i < options.libraryClients; i++) {
      const name = `lib${i + 1}`;
      this.libraryClients.push(new LibraryClient(sched, net, name, this.history, { keys: options.keys, servers: options.servers, until: options.until, token: token() }));
    }
  }

  start(): void {
    for (const c of this.clients) c.start();
    for (const c of this.libraryClients) c.start();
    this.stopAtTheEnd();
  }

  /** New operations stop at `until` in scenario time (a warp does not bring the end closer). */
  private stopAtTheEnd(): void {
    const left = this.options.until - this.sched.scenarioNow;
    // Within a hundredth of a ms: after a warp of days, `now + left` may round back to `now`.
    if (left < 0.01) this.running = false;
    else this.sched.after(left, 'workload: stop issuing', () => this.stopAtTheEnd());
  }

  get active(): boolean {
    return this.running;
  }

  /** Operations still waiting for an outcome. */
  get inFlight(): number {
    return this.clients.reduce((n, c) => n + c.inFlight, 0) + this.libraryClients.reduce((n, c) => n + c.inFlight, 0);
  }

  /** Ends every connection (the run is over): what is unanswered is recorded as unknown. */
  closeAll(): void {
    this.running = false;
    for (const c of this.clients) c.close();
    for (const c of this.libraryClients) c.close();
  }

  /**
   * Every time a client believed it held a key: the library's tickets as
   * they report their own validity, and the raw clients' grants from the
   * history (from the reply to the release, within the lease counted from
   * the request, less the clock-rate error; a lease grows or shrinks with
   * the client's extensions, see leaseEnd).
   */
  holds(): Hold[] {
    const holds = this.libraryClients.flatMap((c) => c.holds);
    const library = new Set<string | number>(this.libraryClients.map((c) => c.name));
    const releasedAt = new Map<string, number>();
    const extensions = new Map<string, ExtendOp[]>();
    for (const op of [...this.history, ...this.unsettled]) {
      if (op.op === 'acquire') continue;
      const id = `${op.client} ${op.token}`;
      if (op.op === 'release') releasedAt.set(id, Math.min(op.invokedAt, releasedAt.get(id) ?? Infinity));
      else (extensions.get(id) ?? extensions.set(id, []).get(id)!).push(op);
    }
    for (const op of this.history) {
      if (op.op !== 'acquire' || op.outcome !== 'granted' || library.has(op.client) || op.completedAt === undefined) continue;
      const id = `${op.client} ${op.token}`;
      const released = releasedAt.get(id) ?? Infinity;
      for (const [from, to] of holdSpans(op.completedAt, op.invokedAt + op.leaseMs, extensions.get(id) ?? [])) {
        holds.push({ client: String(op.client), key: op.key, token: op.token, from, to: Math.min(to, released) });
      }
    }
    return holds;
  }
}

/**
 * When a raw client believed it held its grant, given its extensions of it
 * (the client side of CLIENT.md's rule): from the grant's reply, until its
 * lease counted from the request. An extension sent while that lease ran
 * may take effect at once, so the end becomes the earlier of the two at its
 * send; its `X`, if it came before that end, makes it the extension's lease
 * from the send. An `X` that comes later (or answers an extension sent
 * after the end) still says the grant is current with that lease
 * (PROTOCOL.md): held again from that reply. `G` and unknown outcomes move
 * nothing further.
 */
function holdSpans(grantedAt: number, grantEnd: number, extensions: readonly ExtendOp[]): Array<[number, number]> {
  const spans: Array<[number, number]> = [[grantedAt, grantEnd]];
  for (const x of [...extensions].sort((a, b) => a.invokedAt - b.invokedAt)) {
    const span = spans.at(-1)!;
    const extendedEnd = x.invokedAt + x.leaseMs;
    if (x.invokedAt < span[1]) span[1] = Math.min(span[1], extendedEnd);
    if (x.outcome !== 'extended' || x.completedAt! >= extendedEnd) continue;
    if (x.completedAt! < span[1]) span[1] = extendedEnd;
    else spans.push([x.completedAt!, extendedEnd]);
  }
  return spans;
}

/** Keys of one pipelining client (its own: its acquires are granted at once, one log entry each). */
const PIPELINED_KEYS = 24;

interface ClientProfile {
  readonly keys: readonly string[];
  /** Requests it lets wait for replies on one connection. */
  readonly maxUnanswered: number;
  /** Most ms between two of its requests. */
  readonly paceMs: number;
  /** Its client token (an identity's, or a bare one), on every connection. */
  readonly token: string | undefined;
}

class SimClient {
  private conn: WireConnection | undefined;
  private target: string;
  /** Tokens this client was granted, per key (the source of stale releases). */
  private readonly tokens = new Map<string, bigint[]>();
  inFlight = 0;

  constructor(
    private readonly w: Workload,
    readonly name: string,
    private readonly profile: ClientProfile,
  ) {
    this.target = w.sched.pick(w.options.servers);
  }

  start(): void {
    this.w.sched.after(this.w.sched.random() * 50, `${this.name}: start`, () => this.connect());
  }

  close(): void {
    this.conn?.reset();
  }

  private connect(): void {
    const w = this.w;
    if (!w.active) return;
    const conn = new WireConnection(w.sched, w.net, this.name, this.target, w.history, this.name, {
      redirected: (address) => {
        this.target = address ?? w.sched.pick(w.options.servers);
      },
      closed: () => {
        if (this.conn !== conn) return;
        this.conn = undefined;
        if (w.sched.chance(0.3)) this.target = w.sched.pick(w.options.servers);
        w.sched.after(20 + w.sched.random() * 200, `${this.name}: reconnect`, () => this.connect());
      },
    }, w.unsettled, this.profile.token);
    this.conn = conn;
    this.next();
  }

  /** Issues one operation soon, then another. */
  private next(): void {
    const w = this.w;
    w.sched.after(w.sched.random() * this.profile.paceMs, `${this.name}: next`, () => {
      const conn = this.conn;
      if (!w.active || conn === undefined || !conn.isOpen) return;
      if (conn.unanswered < this.profile.maxUnanswered) this.issue(conn);
      this.next();
    });
  }

  private issue(conn: WireConnection): void {
    const s = this.w.sched;
    const roll = s.random();
    const key = s.pick(this.profile.keys);
    if (roll < 0.02) {
      s.note(`${this.name}: half-closes`);
      conn.halfClose();
    } else if (roll < 0.03) {
      s.note(`${this.name}: resets`);
      conn.reset();
    } else if (roll < 0.12) {
      const old = this.tokens.get(key);
      if (old !== undefined && old.length > 0) this.release(conn, key, s.pick(old));
    } else if (roll < 0.15) {
      // An extension of a token that may be stale (late, or another holder's turn now): G or X.
      const old = this.tokens.get(key);
      if (old !== undefined && old.length > 0) this.extend(conn, key, s.pick(old), s.int(1, 3));
    } else {
      this.acquire(conn, key, s.pick([0, 0, 1, 1, 2, 3]), s.int(1, 3));
      // Sometimes a second acquire of the same key right behind it: replies keep their order.
      if (s.chance(0.15)) this.acquire(conn, key, s.int(0, 2), s.int(1, 3));
    }
  }

  private acquire(conn: WireConnection, key: string, wait: number, lease: number): void {
    const s = this.w.sched;
    this.inFlight++;
    conn.acquire(key, wait, lease, (o) => {
      this.inFlight--;
      if (o.kind !== 'granted') return;
      const list = this.tokens.get(key) ?? [];
      list.push(o.token);
      this.tokens.set(key, list);
      // Sometimes extend it, longer or shorter, now and then late (after the lease ran out).
      if (s.chance(0.6)) this.extendLater(key, o.token, lease);
      // Hold it a while, then release on whatever connection is open then; sometimes never (the lease ends it).
      if (s.chance(0.85)) {
        s.after(s.random() * lease * 900, `${this.name}: done with ${key}`, () => {
          const now = this.conn;
          if (now !== undefined && now.isOpen) this.release(now, key, o.token);
        });
      }
    });
  }

  private extendLater(key: string, token: bigint, lease: number): void {
    const s = this.w.sched;
    s.after(s.random() * lease * 1_100, `${this.name}: extends ${key}`, () => {
      const now = this.conn;
      if (now === undefined || !now.isOpen) return;
      const next = s.int(1, 3);
      this.extend(now, key, token, next, (o) => {
        // Kept alive a few times, as a keep-alive would.
        if (o.kind === 'extended' && s.chance(0.7)) this.extendLater(key, token, next);
      });
    });
  }

  private extend(conn: WireConnection, key: string, token: bigint, lease: number, then: (o: Outcome) => void = () => {}): void {
    this.inFlight++;
    conn.extend(key, token, lease, (o) => {
      this.inFlight--;
      then(o);
    });
  }

  private release(conn: WireConnection, key: string, token: bigint): void {
    this.inFlight++;
    conn.release(key, token, () => this.inFlight--);
  }
}
