/**
 * Records a history from clients talking the raw protocol to a server or
 * cluster, for check(). Each client has one connection at a time and never
 * retries: an operation whose reply is lost (the connection broke, or no
 * reply within wait + 5 s) is recorded as `unknown`, and the next operation
 * opens a new connection.
 *
 *   const recorder = new HistoryRecorder({ addresses: ['127.0.0.1:5225'] });
 *   const a = recorder.client();
 *   const op = await a.acquire('k', 0, 5);
 *   if (op?.outcome === 'granted') await a.release('k', op.token);
 *   recorder.close();
 *   const verdict = check(recorder.history());
 */
import { keyError, MAX_LEASE_SECONDS, MAX_WAIT_SECONDS, MIN_LEASE_SECONDS } from '@ticketing/protocol';
import { ConnectError, ProtocolConnection, type ConnectOptions } from './connection.js';
import type { AcquireOp, ExtendOp, Operation, ReleaseOp } from './history.js';

export interface RecorderOptions extends ConnectOptions {
  /** The cluster's client addresses, `host:port`; client n starts at addresses[n % length]. */
  readonly addresses: readonly string[];
  /** How long after the wait a reply may take before the operation counts as unknown. Default 5000 ms. */
  readonly replyGraceMs?: number;
}

/** Redirects followed in a row before an address is given up for this attempt (CLIENT.md). */
const MAX_REDIRECTS = 3;

export class HistoryRecorder {
  private readonly ops: Operation[] = [];
  private readonly clients: RecordingClient[] = [];

  constructor(readonly options: RecorderOptions) {
    if (options.addresses.length === 0) throw new RangeError('HistoryRecorder needs at least one address');
  }

  /** A new client with its own connection; `name` (default its number) appears in reports. */
  client(name?: number | string): RecordingClient {
    const client = new RecordingClient(this, name ?? this.clients.length, this.clients.length % this.options.addresses.length);
    this.clients.push(client);
    return client;
  }

  /** A copy of the history so far; operations still waiting for a reply are `unknown` in it. */
  history(): Operation[] {
    return [...this.ops];
  }

  /** Closes every client's connection: operations still pending stay `unknown`. */
  close(): void {
    for (const c of this.clients) c.close();
  }

  /** @internal Adds an invoked operation; returns its index, to complete it later. */
  invoke(op: Operation): number {
    return this.ops.push(op) - 1;
  }

  /** @internal */
  complete(index: number, op: Operation): void {
    this.ops[index] = op;
  }
}

export class RecordingClient {
  private conn: ProtocolConnection | undefined;
  private connecting: Promise<ProtocolConnection | undefined> | undefined;
  private closed = false;
  /** Why the last connection attempt failed, for callers that want to say so. */
  lastConnectError: string | undefined;

  /** @internal Use HistoryRecorder.client(). */
  constructor(
    private readonly recorder: HistoryRecorder,
    readonly name: number | string,
    private readonly home: number,
  ) {}

  /**
   * `A key wait lease` (seconds). Resolves with the recorded operation, or
   * undefined when no connection could be had (nothing was sent, nothing
   * recorded).
   */
  async acquire(key: string, waitSeconds: number, leaseSeconds: number): Promise<AcquireOp | undefined> {
    checkKey(key);
    if (!Number.isInteger(waitSeconds) || waitSeconds < 0 || waitSeconds > MAX_WAIT_SECONDS) throw new RangeError(`wait must be 0..${MAX_WAIT_SECONDS} seconds`);
    if (!Number.isInteger(leaseSeconds) || leaseSeconds < MIN_LEASE_SECONDS || leaseSeconds > MAX_LEASE_SECONDS) {
      throw new RangeError(`lease must be ${MIN_LEASE_SECONDS}..${MAX_LEASE_SECONDS} seconds`);
    }
    const conn = await this.connection();
    if (conn === undefined) return undefined;
    const base = { client: this.name, op: 'acquire' as const, key, waitMs: waitSeconds * 1000, leaseMs: leaseSeconds * 1000 };
    const invokedAt = performance.now();
    const index = this.recorder.invoke({ ...base, invokedAt, completedAt: undefined, outcome: 'unknown' });
    const result = await conn.request({ op: 'A', key, waitSeconds, leaseSeconds }, waitSeconds * 1000 + this.grace());
    const op: AcquireOp =
      result.reply === 'lost'
        ? { ...base, invokedAt, completedAt: undefined, outcome: 'unknown' }
        : result.reply === 'A'
          ? { ...base, invokedAt, completedAt: result.at, outcome: 'granted', token: result.token }
          : { ...base, invokedAt, completedAt: result.at, outcome: result.reply === 'B' ? 'busy' : 'timeout' };
    this.recorder.complete(index, op);
    return op;
  }

  /** `R key token`. Resolves with the recorded operation, or undefined when nothing could be sent. */
  async release(key: string, token: bigint): Promise<ReleaseOp | undefined> {
    checkKey(key);
    const conn = await this.connection();
    if (conn === undefined) return undefined;
    const base = { client: this.name, op: 'release' as const, key, token };
    const invokedAt = performance.now();
    const index = this.recorder.invoke({ ...base, invokedAt, completedAt: undefined, outcome: 'unknown' });
    const result = await conn.request({ op: 'R', key, token }, this.grace());
    const op: ReleaseOp =
      result.reply === 'lost'
        ? { ...base, invokedAt, completedAt: undefined, outcome: 'unknown' }
        : { ...base, invokedAt, completedAt: result.at, outcome: result.reply === 'R' ? 'released' : 'not-held' };
    this.recorder.complete(index, op);
    return op;
  }

  /** `X key token lease` (seconds). Resolves with the recorded operation, or undefined when nothing could be sent. */
  async extend(key: string, token: bigint, leaseSeconds: number): Promise<ExtendOp | undefined> {
    checkKey(key);
    if (!Number.isInteger(leaseSeconds) || leaseSeconds < MIN_LEASE_SECONDS || leaseSeconds > MAX_LEASE_SECONDS) {
      throw new RangeError(`lease must be ${MIN_LEASE_SECONDS}..${MAX_LEASE_SECONDS} seconds`);
    }
    const conn = await this.connection();
    if (conn === undefined) return undefined;
    const base = { client: this.name, op: 'extend' as const, key, token, leaseMs: leaseSeconds * 1000 };
    const invokedAt = performance.now();
    const index = this.recorder.invoke({ ...base, invokedAt, completedAt: undefined, outcome: 'unknown' });
    const result = await conn.request({ op: 'X', key, token, leaseSeconds }, this.grace());
    const op: ExtendOp =
      result.reply === 'lost'
        ? { ...base, invokedAt, completedAt: undefined, outcome: 'unknown' }
        : { ...base, invokedAt, completedAt: result.at, outcome: result.reply === 'X' ? 'extended' : 'not-extended' };
    this.recorder.complete(index, op);
    return op;
  }

  /** Connects now (operations connect by themselves too); false when no address gave a usable connection. */
  async connect(): Promise<boolean> {
    return (await this.connection()) !== undefined;
  }

  /** Closes the connection (pending operations stay unknown); later calls record nothing. */
  close(): void {
    this.closed = true;
    this.conn?.close();
  }

  private grace(): number {
    return this.recorder.options.replyGraceMs ?? 5000;
  }

  /** The live connection, or a new one (one attempt shared by concurrent callers). */
  private async connection(): Promise<ProtocolConnection | undefined> {
    if (this.closed) return undefined;
    if (this.conn?.alive === true) return this.conn;
    this.connecting ??= this.openAny().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  /** Tries each address once, from this client's own, following redirects. */
  private async openAny(): Promise<ProtocolConnection | undefined> {
    const { addresses } = this.recorder.options;
    for (let n = 0; n < addresses.length; n++) {
      let address: string | undefined = addresses[(this.home + n) % addresses.length];
      for (let hop = 0; address !== undefined && hop <= MAX_REDIRECTS; hop++) {
        try {
          const conn = await ProtocolConnection.open(address, this.recorder.options);
          if (this.closed) {
            conn.close();
            return undefined;
          }
          this.conn = conn;
          this.lastConnectError = undefined;
          return conn;
        } catch (err) {
          this.lastConnectError = (err as Error).message;
          address = err instanceof ConnectError ? err.redirect : undefined;
        }
      }
    }
    return undefined;
  }
}

function checkKey(key: string): void {
  const problem = keyError(key);
  if (problem !== undefined) throw new RangeError(problem);
}
