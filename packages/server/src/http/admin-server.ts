/**
 * The admin HTTP listener (`--http HOST:PORT`): Prometheus metrics, health
 * and readiness probes, status JSON, the live dashboard and the deployment
 * page, the locks API (locks-api.ts), and Raft membership
 * (admin-membership.ts: its changes, like a release, need the token as a
 * Bearer header always). With `http-token` set, everything
 * but `/healthz` and `/readyz` needs `Authorization: Bearer <token>` (or HTTP
 * Basic with the token as password, which browsers prompt for). The one
 * request that changes lock state, an operator's release
 * (`POST /locks/KEY/release`), needs the token as a Bearer header always: it
 * is refused when no token is configured, even on loopback, and Basic does
 * not do (a browser sends remembered Basic credentials with any page's form;
 * it never adds a Bearer header by itself, so no other site can make it
 * release a lock). A backup (`GET /snapshot`, every key and token) needs the
 * Bearer header always too.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { SecureContextOptions } from 'node:tls';
import { hostAllowed } from './admin-host.js';
import type { AddressInfo, Socket } from 'node:net';
import { IdleEvictingPool } from '../net/idle-evicting-pool.js';
import type { Logger } from 'pino';
import { joinHostPort, splitHostPort } from '../net/address.js';
import type { NodeView } from '../node/node-view.js';
import { SecretSet } from '../secret-set.js';
import { MetricsHistory } from './history.js';
import { NodeMetrics } from './metrics.js';
import { LocksApi } from './locks-api.js';
import { loadWebAssets, type Asset } from './web-assets.js';
import { handleMembership } from './admin-membership.js';
import { encodeBackup } from '../storage/backup.js';

/** Roles in which a node serves clients: what `/readyz` reports as ready. */
const SERVING_ROLES = new Set(['single', 'active', 'leader']);
/**
 * Admin connections open at once, in all and per source address. Beyond
 * either, the connection idle longest is closed to make room (net/idle-evicting-pool.ts):
 * a flood of idle or slowloris sockets cannot keep /healthz out.
 */
export const MAX_ADMIN_CONNECTIONS = 64;
export const MAX_ADMIN_CONNECTIONS_PER_ADDRESS = 16;
/** A request's headers must arrive within this, the whole request within REQUEST; an idle keep-alive connection lasts KEEP_ALIVE. */
const HEADERS_TIMEOUT_MS = 5_000;
const REQUEST_TIMEOUT_MS = 10_000;
const KEEP_ALIVE_TIMEOUT_MS = 5_000;
/** How often Node checks those deadlines (its default, 30 s, would let a slow request live that long). */
const DEADLINE_CHECK_MS = 1_000;
/** How many of the most contended keys `/status` lists. */
const CONTENDED_KEYS = 10;

const PAGE_HEADERS = {
  // No third-party origin may be reached: the pages work offline and leak nothing.
  'content-security-policy': "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'referrer-policy': 'no-referrer',
};

export class AdminServer {
  private readonly metrics: NodeMetrics;
  private readonly locks: LocksApi;
  private readonly history: MetricsHistory;
  private readonly assets: Map<string, Asset>;
  /** The admin token (empty: none needed). */
  private readonly tokens: SecretSet;

  private constructor(
    private readonly node: NodeView,
    private readonly server: Server,
    token: string | undefined,
    /** Host names (besides IP literals and localhost) requests may name. */
    private readonly hosts: readonly string[],
    private readonly logger: Logger,
  ) {
    this.metrics = new NodeMetrics(node);
    this.locks = new LocksApi(node, logger);
    this.history = new MetricsHistory(node, this.metrics, node.clock);
    this.assets = loadWebAssets();
    this.tokens = new SecretSet(token === undefined ? [] : [token]);
  }

  static async start(
    node: NodeView,
    address: string,
    token: string | undefined,
    logger: Logger,
    options: { readonly hosts?: readonly string[]; readonly tls?: SecureContextOptions } = {},
  ): Promise<AdminServer> {
    const timeouts = { headersTimeout: HEADERS_TIMEOUT_MS, requestTimeout: REQUEST_TIMEOUT_MS, keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS, connectionsCheckingInterval: DEADLINE_CHECK_MS };
    const server = options.tls === undefined ? createServer(timeouts) : createHttpsServer({ ...options.tls, ...timeouts });
    if (options.tls !== undefined) server.on('tlsClientError', (err: Error, socket: { destroy(): void }) => (logger.debug({ err }, 'admin TLS handshake failed'), socket.destroy()));
    // Admin connections count against the file descriptors too: a few scrapers and browsers need no more.
    const pool = new IdleEvictingPool({ total: MAX_ADMIN_CONNECTIONS, perAddress: MAX_ADMIN_CONNECTIONS_PER_ADDRESS });
    /** Pool handles by "address:port": the TLS socket a request arrives on is not the TCP socket that was counted. */
    const handles = new Map<string, { busy(): void; idle(): void }>();
    server.on('connection', (socket: Socket) => {
      const id = `${socket.remoteAddress}:${socket.remotePort}`;
      const handle = pool.admit({ remoteAddress: socket.remoteAddress, close: () => socket.destroy() });
      if (handle === undefined) return void socket.destroy();
      handles.set(id, handle);
      socket.once('close', () => {
        handle.release();
        handles.delete(id);
      });
    });
    const admin = new AdminServer(node, server, token, options.hosts ?? [], logger);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      const handle = handles.get(`${req.socket.remoteAddress}:${req.socket.remotePort}`);
      handle?.busy();
      res.once('close', () => handle?.idle());
      admin.handle(req, res).catch((err: Error) => {
        logger.error({ err, url: req.url }, 'admin request failed');
        if (!res.headersSent) send(res, 500, 'text/plain; charset=utf-8', 'internal error\n');
        else res.destroy();
      });
    });
    const { host, port } = splitHostPort(address);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host, port }, () => {
        server.off('error', reject);
        resolve();
      });
    });
    // After it started, a listening server's error (EMFILE on accept) must not stop the node.
    server.on('error', (err) => logger.error({ err }, 'admin listener error; still listening'));
    logger.info({ http: admin.address, token: token !== undefined, tls: options.tls !== undefined }, 'admin listener serving');
    return admin;
  }

  get address(): string {
    const a = this.server.address() as AddressInfo;
    return joinHostPort(a.address, a.port);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://admin');
    } catch {
      // Not a target any client of ours sends: nothing to log, nothing to trace.
      return send(res, 400, 'text/plain; charset=utf-8', 'bad request target\n');
    }
    const path = url.pathname;
    if (path.startsWith('/members') && hostAllowed(req.headers.host, this.hosts)) {
      // A read may use Basic (a browser); a change needs the Bearer header, as a release does.
      const reads = req.method === 'GET' || req.method === 'HEAD';
      const header = req.headers.authorization;
      const auth = { configured: this.tokens.count > 0, authorized: this.tokens.count > 0 && (reads ? this.authorized(header) : this.bearer(header)) };
      if (await handleMembership(this.node, req, res, path, auth, this.logger)) return;
    }
    const changes = LocksApi.isRelease(req.method, path);
    if (req.method !== 'GET' && req.method !== 'HEAD' && !changes) {
      res.setHeader('allow', LocksApi.owns(path) && path.endsWith('/release') ? 'POST' : 'GET, HEAD');
      return send(res, 405, 'text/plain; charset=utf-8', 'only GET and HEAD (and POST /locks/KEY/release)\n');
    }
    if (path === '/healthz') return send(res, 200, 'text/plain; charset=utf-8', 'ok\n');
    // Readiness is asked by probes and load balancers, which send no token; it tells only the role.
    if (path === '/readyz') return this.readyz(res);
    // DNS rebinding: a page whose name now points here must not read status or metrics.
    if (!hostAllowed(req.headers.host, this.hosts)) {
      return send(res, 421, 'text/plain; charset=utf-8', 'unknown Host: use an IP address, localhost, or a name listed in http-hosts\n');
    }
    if (path === '/snapshot') return this.snapshot(req, res);
    if (changes) {
      // Nothing unauthenticated changes state: not even on loopback, not with remembered Basic credentials.
      if (this.tokens.count === 0) return send(res, 403, 'text/plain; charset=utf-8', 'state-changing requests need an http-token, and this node has none configured\n');
      if (!this.bearer(req.headers.authorization)) return send(res, 401, 'text/plain; charset=utf-8', 'this request needs the admin token as Authorization: Bearer <http-token>\n');
      return this.locks.handle(req, res, url, true);
    }
    if (!this.authorized(req.headers.authorization)) {
      res.setHeader('www-authenticate', 'Basic realm="Ticketing admin", charset="UTF-8"');
      return send(res, 401, 'text/plain; charset=utf-8', 'admin token required (Authorization: Bearer <http-token>)\n');
    }
    // Waiters' identities only for an authenticated admin: with no http-token, nobody is one.
    if (LocksApi.owns(path)) return this.locks.handle(req, res, url, this.tokens.count > 0);
    switch (path) {
      case '/metrics':
        return send(res, 200, this.metrics.contentType, await this.metrics.render());
      case '/history':
        return send(res, 200, 'application/json; charset=utf-8', JSON.stringify(this.history));
      case '/status': {
        const body = { ...this.node.status(), contended: this.node.engine.mostContended(CONTENDED_KEYS) };
        return send(res, 200, 'application/json; charset=utf-8', `${JSON.stringify(body, null, 2)}\n`);
      }
    }
    const asset = this.assets.get(path);
    if (asset === undefined) return send(res, 404, 'text/plain; charset=utf-8', 'not found\n');
    for (const [name, value] of Object.entries(PAGE_HEADERS)) res.setHeader(name, value);
    return send(res, 200, asset.type, asset.body);
  }

  /**
   * `GET /snapshot`: a backup of the table this node serves (storage/backup.ts).
   * It holds every key and token, so it needs the token as a Bearer header
   * always, as a change does.
   */
  private snapshot(req: IncomingMessage, res: ServerResponse): void {
    if (this.tokens.count === 0) return send(res, 403, 'text/plain; charset=utf-8', 'a backup needs an http-token, and this node has none configured\n');
    if (!this.bearer(req.headers.authorization)) return send(res, 401, 'text/plain; charset=utf-8', 'a backup needs the admin token as Authorization: Bearer <http-token>\n');
    const backup = this.node.backup?.();
    if (backup === undefined) {
      const status = this.node.status();
      return send(res, 409, 'text/plain; charset=utf-8', `this node is ${status.role}, not serving: take the backup from the serving node (clients reach it at ${status.active ?? 'an address this node does not know'})\n`);
    }
    this.logger.info({ locks: backup.locks.length, tokenFloor: backup.tokenFloor.toString(), remote: req.socket.remoteAddress }, 'backup taken through the admin API');
    return send(res, 200, 'text/plain; charset=utf-8', encodeBackup(backup));
  }

  private readyz(res: ServerResponse): void {
    const role = this.role();
    // A priority active whose sync-standbys do not acknowledge holds every reply: not ready.
    const stalled = this.stalled();
    const ready = SERVING_ROLES.has(role) && !stalled;
    send(res, ready ? 200 : 503, 'text/plain; charset=utf-8', `${ready ? 'ready' : 'not ready'} role=${role}${stalled ? ' replies-stalled (fewer standbys acknowledge than sync-standbys)' : ''}\n`);
  }

  /** A node whose status cannot be read (while it stops, its listener is gone) is not ready. */
  private role(): string {
    try {
      return this.node.status().role;
    } catch {
      return 'unknown';
    }
  }

  private stalled(): boolean {
    try {
      return this.node.status().replication?.stalled === true;
    } catch {
      return false;
    }
  }

  private authorized(header: string | undefined): boolean {
    if (this.tokens.count === 0) return true;
    const given = presentedToken(header);
    return given !== undefined && this.tokens.matches(given);
  }

  /** The configured token, presented as `Authorization: Bearer <token>` (not Basic). */
  private bearer(header: string | undefined): boolean {
    const m = /^Bearer +(\S+)$/i.exec(header ?? '');
    return m !== null && this.tokens.matches(m[1]!);
  }
}

/** The token in `Bearer <token>`, or the password in `Basic base64(user:password)`. */
function presentedToken(header: string | undefined): string | undefined {
  const m = /^(Bearer|Basic) +(\S+)$/i.exec(header ?? '');
  if (m === null) return undefined;
  if (m[1]!.toLowerCase() === 'bearer') return m[2];
  const decoded = Buffer.from(m[2]!, 'base64').toString('utf8');
  return decoded.slice(decoded.indexOf(':') + 1);
}

function send(res: ServerResponse, status: number, type: string, body: string | Buffer): void {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
  res.end(body);
}
