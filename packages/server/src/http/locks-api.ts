/**
 * The admin listener's locks API: who holds what, and an operator's release
 * of a stuck lock.
 *
 *   GET  /locks?prefix=P&limit=N&after=KEY   held locks in key order, a page at a time
 *   GET  /locks/KEY                          one lock, with its queue
 *   POST /locks/KEY/release  {"token": "T"}  release exactly that grant
 *
 * KEY is percent-encoded in the path (`encodeURIComponent`). Reads show
 * this node's table: the locks it serves, or on a standby or follower its
 * replicated copy (`serving: false`; the queues live on the serving node).
 * Waiters' identities and addresses are shown only to an authenticated admin
 * (a request that presented the configured `http-token`). The release is the
 * only request here that changes anything: admin-server.ts lets it through
 * only with the `http-token` as a Bearer header, and refuses it when no
 * token is configured; it is replicated like a client's release, logged at
 * warn with who asked, and counted in `ticketing_forced_releases_total`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { keyError, MAX_TOKEN, MIN_TOKEN } from '@ticketing/protocol';
import type { Logger } from 'pino';
import type { LeasedRecord } from '../engine/lock-engine.js';
import type { NodeView } from '../node/node-view.js';

/** Locks per page by default, and at most. */
export const DEFAULT_PAGE = 100;
export const MAX_PAGE = 1_000;
/** The most a release request's body may hold. */
const MAX_BODY_BYTES = 4_096;
/** The most of an operator's `by` kept for the log. */
const MAX_BY_CHARS = 100;

/** One held lock as the API shows it. */
export interface LockJson {
  readonly key: string;
  /** The fencing token, as a decimal string (JSON has no u64). */
  readonly token: string;
  /** The named client identity that acquired it; null for a bare token or none. */
  readonly holder: string | null;
  /** The lease it was granted or last extended by. */
  readonly leaseMs: number;
  /** What is left of it, on this node's clock. */
  readonly remainingMs: number;
  /** When this node's table first held this grant (a node that took over counts from when it learned of it). */
  readonly heldSince: string;
  readonly waiters: number;
}

export interface WaiterJson {
  /** Place in the queue, 1 = next. */
  readonly position: number;
  readonly waitingMs: number;
  /** Until its wait runs out (reply T). */
  readonly waitLeftMs: number;
  readonly leaseMs: number;
  /** Only for an authenticated admin: the connection's identity (null: a bare token or none) and address. */
  readonly identity?: string | null;
  readonly remote?: string | null;
}

export type Reply = { readonly status: number; readonly body: unknown };

class BadRequest extends Error {}

export class LocksApi {
  constructor(
    private readonly node: NodeView,
    private readonly logger: Logger,
  ) {}

  /** True when `path` is this API's. */
  static owns(path: string): boolean {
    return path === '/locks' || path.startsWith('/locks/');
  }

  /** True when this request would change state (the release). */
  static isRelease(method: string | undefined, path: string): boolean {
    return method === 'POST' && path.startsWith('/locks/') && path.endsWith('/release');
  }

  async handle(req: IncomingMessage, res: ServerResponse, url: URL, admin: boolean): Promise<void> {
    let reply: Reply;
    try {
      reply = LocksApi.isRelease(req.method, url.pathname) ? await this.release(req, url) : this.read(url, admin);
    } catch (err) {
      if (!(err instanceof BadRequest)) throw err;
      reply = { status: 400, body: { error: err.message } };
    }
    const text = `${JSON.stringify(reply.body, null, 2)}\n`;
    res.writeHead(reply.status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
    res.end(req.method === 'HEAD' ? undefined : text);
  }

  private read(url: URL, admin: boolean): Reply {
    if (url.pathname === '/locks') return { status: 200, body: this.list(url.searchParams) };
    const key = keyIn(url.pathname.slice('/locks/'.length));
    const record = this.node.lockTable()?.get(key);
    if (record === undefined) return { status: 404, body: { ...this.where(), key, error: 'not held' } };
    return { status: 200, body: { ...this.where(), ...this.lockJson(record), queue: this.queue(key, admin) } };
  }

  /** Held locks in key order after `after`, at most `limit`, with the cursor of the next page. */
  private list(q: URLSearchParams): unknown {
    const prefix = q.get('prefix') ?? '';
    if (Buffer.byteLength(prefix) > 250) throw new BadRequest('prefix: at most 250 bytes');
    const after = q.get('after') ?? undefined;
    const limitText = q.get('limit') ?? String(DEFAULT_PAGE);
    const limit = /^\d{1,4}$/.test(limitText) ? Number(limitText) : NaN;
    if (!(limit >= 1 && limit <= MAX_PAGE)) throw new BadRequest(`limit: a whole number 1..${MAX_PAGE}`);
    // One pass over the table keeping the `limit + 1` smallest keys (a bounded heap): a page
    // costs O(held locks x log limit), however large the table, and no sort of all of it.
    const page = new SmallestKeys(limit + 1);
    let matched = 0;
    for (const r of this.node.lockTable()?.records() ?? []) {
      if (!r.key.startsWith(prefix)) continue;
      matched++;
      if (after === undefined || r.key > after) page.offer(r);
    }
    const records = page.sorted();
    const more = records.length > limit;
    const shown = records.slice(0, limit);
    return { ...this.where(), prefix, matched, locks: shown.map((r) => this.lockJson(r)), next: more ? shown.at(-1)!.key : null };
  }

  private async release(req: IncomingMessage, url: URL): Promise<Reply> {
    const key = keyIn(url.pathname.slice('/locks/'.length, -'/release'.length));
    const body = await readJson(req);
    const token = tokenIn(body.token);
    const by = typeof body.by === 'string' ? body.by.replace(/[^\x20-\x7e]/g, '?').slice(0, MAX_BY_CHARS) : undefined;
    const current = this.node.lockTable()?.get(key);
    const asked = { key, token: token.toString(), holder: current?.token === token ? (current.owner ?? null) : undefined, by, remote: `${req.socket.remoteAddress}:${req.socket.remotePort}` };
    const result = await this.node.forceRelease(key, token);
    switch (result) {
      case 'released':
        this.logger.warn(asked, 'an operator force-released a lock (admin API)');
        return { status: 200, body: { key, token: token.toString(), released: true } };
      case 'not-held':
        this.logger.info(asked, 'an operator asked to force-release a lock not held under that token');
        return { status: 409, body: { key, token: token.toString(), released: false, current: this.node.lockTable()?.get(key)?.token.toString() ?? null } };
      case 'not-serving':
        return { status: 503, body: { ...this.where(), key, error: 'this node does not serve clients: send the release to the active node (or leader)' } };
      case 'unknown':
        this.logger.warn(asked, 'an operator force-released a lock, but this node stopped leading before it committed');
        return { status: 504, body: { key, token: token.toString(), error: 'this node stopped serving before the release was replicated: it may or may not have taken effect' } };
    }
  }

  private where(): { node: string; role: string; serving: boolean; active: string | null } {
    const s = this.node.status();
    return { node: s.node, role: s.role, serving: this.node.engine.serving, active: s.active ?? null };
  }

  private lockJson(r: LeasedRecord): LockJson {
    const now = this.node.clock.now();
    return {
      key: r.key,
      token: r.token.toString(),
      holder: r.owner ?? null,
      leaseMs: r.leaseMs,
      remainingMs: Math.max(0, Math.ceil(r.due - now)),
      heldSince: new Date(this.node.clock.wallNow() - (now - r.since)).toISOString(),
      waiters: this.node.engine.queueLength(r.key),
    };
  }

  private queue(key: string, admin: boolean): WaiterJson[] {
    const now = this.node.clock.now();
    return this.node.engine.waitersOf(key).map((w, i) => ({
      position: i + 1,
      waitingMs: Math.max(0, Math.round(now - w.since)),
      waitLeftMs: Math.max(0, Math.ceil(w.due - now)),
      leaseMs: w.leaseMs,
      ...(admin ? { identity: w.owner.identity ?? null, remote: w.owner.remote ?? null } : {}),
    }));
  }
}

function keyIn(encoded: string): string {
  let key: string;
  try {
    key = decodeURIComponent(encoded);
  } catch {
    throw new BadRequest('the key in the path is not valid percent-encoded UTF-8');
  }
  const problem = keyError(key);
  if (problem !== undefined) throw new BadRequest(`bad key: ${problem}`);
  return key;
}

function tokenIn(value: unknown): bigint {
  const text = typeof value === 'number' && Number.isSafeInteger(value) ? String(value) : value;
  if (typeof text !== 'string' || !/^[1-9]\d{0,19}$/.test(text)) throw new BadRequest('token: the fencing token as a decimal string, e.g. {"token": "1764501234000001"}');
  const token = BigInt(text);
  if (token < MIN_TOKEN || token > MAX_TOKEN) throw new BadRequest(`token: 1..${MAX_TOKEN}`);
  return token;
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new BadRequest(`the body is larger than ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new BadRequest('the body must be JSON: {"token": "<fencing token>"}');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new BadRequest('the body must be a JSON object: {"token": "<fencing token>"}');
  return parsed as Record<string, unknown>;
}

/** The `n` records with the smallest keys among those offered (a max-heap by key). */
class SmallestKeys {
  private readonly heap: LeasedRecord[] = [];

  constructor(private readonly n: number) {}

  offer(r: LeasedRecord): void {
    const h = this.heap;
    if (h.length < this.n) {
      h.push(r);
      this.up(h.length - 1);
    } else if (r.key < h[0]!.key) {
      h[0] = r;
      this.down(0);
    }
  }

  sorted(): LeasedRecord[] {
    return [...this.heap].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  private up(i: number): void {
    const h = this.heap;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (h[parent]!.key >= h[i]!.key) return;
      [h[parent], h[i]] = [h[i]!, h[parent]!];
      i = parent;
    }
  }

  private down(i: number): void {
    const h = this.heap;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let top = i;
      if (l < h.length && h[l]!.key > h[top]!.key) top = l;
      if (r < h.length && h[r]!.key > h[top]!.key) top = r;
      if (top === i) return;
      [h[top], h[i]] = [h[i]!, h[top]!];
      i = top;
    }
  }
}
