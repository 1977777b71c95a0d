/**
 * The `ticketing verify` workload: N clients, each doing one operation at a
 * time on a small key space so that they contend: acquires that wait 0..2 s
 * with leases of 1..3 s (long enough to expire while their holder waits on
 * another key), extensions of locks held by 1..3 s (which may shorten a
 * lease, or come after it ran out), releases of tokens held, and now and
 * then a release or an extension of a stale token. The keys carry a fresh
 * random prefix, so a run never touches real locks and every key starts
 * free.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Operation } from './history.js';
import { HistoryRecorder, type RecorderOptions, type RecordingClient } from './recorder.js';
import { seededRandom } from './random.js';

export interface WorkloadOptions extends RecorderOptions {
  readonly durationMs: number;
  /** Default 10. */
  readonly clients?: number;
  /** Default 5. */
  readonly keys?: number;
  /** Default `ticketing-verify/<8 random hex digits>/`. */
  readonly keyPrefix?: string;
  /** Seeds the choice of operations (default: random); the run is still timed by the server. */
  readonly seed?: number;
  /** Stops the run early (the clients finish their current operation and release what they hold). */
  readonly signal?: AbortSignal;
  /** Send extensions (X) too. Default true. */
  readonly extensions?: boolean;
}

export interface WorkloadResult {
  readonly history: Operation[];
  readonly keys: readonly string[];
  readonly seed: number;
  /** Operations not sent because no connection could be had. */
  readonly unsent: number;
  /** Why the last connection attempt failed, if one did. */
  readonly lastConnectError: string | undefined;
}

const MAX_WAIT_S = 2;
const LEASE_S = [1, 3] as const;
const MAX_THINK_MS = 100;
const RELEASE_HELD = 0.35;
const EXTEND_HELD = 0.2;
const RELEASE_STALE = 0.05;
const EXTEND_STALE = 0.03;
const STALE_KEPT = 5;

export async function runWorkload(options: WorkloadOptions): Promise<WorkloadResult> {
  const seed = options.seed ?? randomBytes(4).readUInt32LE(0);
  const prefix = options.keyPrefix ?? `ticketing-verify/${randomBytes(4).toString('hex')}/`;
  const keys = Array.from({ length: options.keys ?? 5 }, (_, i) => `${prefix}${i}`);
  const recorder = new HistoryRecorder(options);
  const endAt = performance.now() + options.durationMs;
  const clients = Array.from({ length: options.clients ?? 10 }, (_, n) => recorder.client(n));
  const extensions = options.extensions ?? true;
  const unsent = await Promise.all(clients.map(async (c, n) => runClient(c, seededRandom(seed + n), keys, endAt, options.signal, extensions)));
  recorder.close();
  return {
    history: recorder.history(),
    keys,
    seed,
    unsent: unsent.reduce((a, b) => a + b, 0),
    lastConnectError: clients.map((c) => c.lastConnectError).find((e) => e !== undefined),
  };
}

/** One client's loop; returns how many operations it could not send. */
async function runClient(
  client: RecordingClient,
  rng: () => number,
  keys: readonly string[],
  endAt: number,
  signal: AbortSignal | undefined,
  extensions: boolean,
): Promise<number> {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)]!;
  const lease = () => LEASE_S[0] + Math.floor(rng() * (LEASE_S[1] - LEASE_S[0] + 1));
  const held: Array<{ key: string; token: bigint }> = [];
  const stale: Array<{ key: string; token: bigint }> = [];
  const forget = (grant: { key: string; token: bigint }) => {
    stale.push(grant);
    if (stale.length > STALE_KEPT) stale.shift();
  };
  // Where each kind of operation starts in [0, 1): release held, extend held, release stale, extend stale, else acquire.
  const extendHeld = extensions ? EXTEND_HELD : 0;
  const extendStale = extensions ? EXTEND_STALE : 0;
  const [a, b, c, d] = [RELEASE_HELD, RELEASE_HELD + extendHeld, RELEASE_HELD + extendHeld + RELEASE_STALE, RELEASE_HELD + extendHeld + RELEASE_STALE + extendStale];
  let unsent = 0;
  while (performance.now() < endAt && signal?.aborted !== true) {
    const r = rng();
    let op: Operation | undefined;
    if (held.length > 0 && r < a) {
      const grant = held.splice(Math.floor(rng() * held.length), 1)[0]!;
      op = await client.release(grant.key, grant.token);
      forget(grant);
    } else if (held.length > 0 && r < b) {
      const i = Math.floor(rng() * held.length);
      const grant = held[i]!;
      op = await client.extend(grant.key, grant.token, lease());
      // G: its lease had run out. (Unknown: it may still be held; it stays on the list.)
      if (op?.outcome === 'not-extended') forget(held.splice(i, 1)[0]!);
    } else if (stale.length > 0 && r >= b && r < c) {
      const grant = pick(stale);
      op = await client.release(grant.key, grant.token);
    } else if (stale.length > 0 && r >= c && r < d) {
      const grant = pick(stale);
      op = await client.extend(grant.key, grant.token, lease());
    } else {
      const key = pick(keys);
      const wait = Math.floor(rng() * (MAX_WAIT_S + 1));
      op = await client.acquire(key, wait, lease());
      if (op?.outcome === 'granted') held.push({ key, token: op.token });
    }
    if (op === undefined) {
      unsent++;
      await sleep(200); // no connection: do not spin
    } else {
      await sleep(rng() * MAX_THINK_MS);
    }
  }
  // Leave nothing held behind; these releases are part of the history too.
  for (const grant of held) await client.release(grant.key, grant.token);
  return unsent;
}
