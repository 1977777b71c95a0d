/**
 * The admin HTTP listener (`--http HOST:PORT`): Prometheus metrics, health
 * and readiness probes, status JSON, the live dashboard and the deployment
 * page, and Raft membership (admin-membership.ts: its changes are the only
 * writes here, and always need the token). With `http-token` set,
 * everything but `/healthz` needs `Authorization: Bearer <token>` (or HTTP
 * Basic with the token as password, which browsers prompt for).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { SecureContextOptions } from 'node:tls';
import { hostAllowed } from './admin-host.js';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { joinHostPort, splitHostPort } from '../net/address.js';
import type { NodeView } from '../node/node-view.js';
import { SecretSet } from '../secret-set.js';
import { NodeMetrics } from './metrics.js';
import { loadWebAssets, type Asset } from './web-assets.js';
import { handleMembership } from './admin-membership.js';

/** Roles in which a node serves clients: what `/readyz` reports as ready. */
const SERVING_ROLES = new Set(['single', 'active', 'leader']);
/** Admin connections open at once at most (beyond it new ones are closed). */
export const MAX_ADMIN_CONNECTIONS = 64;
/** How many of the most contended keys `/status` lists. */
const CONTENDED_KEYS = 10;

const PAGE_HEADERS = {
  // No third-party origin may be reached: the pages work offline and leak nothing.
  'content-security-policy': "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'referrer-policy': 'no-referrer',
};

export class AdminServer {
  private readonly metrics: NodeMetrics;
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
    const server = options.tls === undefined ? createServer() : createHttpsServer({ ...options.tls });
    if (options.tls !== undefined) server.on('tlsClientError', (err: Error, socket: { destroy(): void }) => (logger.debug({ err }, 'admin TLS handshake failed'), socket.destroy()));
    // Admin connections count against the file descriptors too: a few scrapers and browsers need no more.
    server.maxConnections = MAX_ADMIN_CONNECTIONS;
    const admin = new AdminServer(node, server, token, options.hosts ?? [], logger);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
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
    const target = new URL(req.url ?? '/', 'http://admin').pathname;
    if (target.startsWith('/members') && hostAllowed(req.headers.host, this.hosts)) {
      const auth = { configured: this.tokens.count > 0, authorized: this.tokens.count > 0 && this.authorized(req.headers.authorization) };
      if (await handleMembership(this.node, req, res, target, auth, this.logger)) return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD');
      return send(res, 405, 'text/plain; charset=utf-8', 'only GET and HEAD\n');
    }
    const path = new URL(req.url ?? '/', 'http://admin').pathname;
    if (path === '/healthz') return send(res, 200, 'text/plain; charset=utf-8', 'ok\n');
    // DNS rebinding: a page whose name now points here must not read status or metrics.
    if (!hostAllowed(req.headers.host, this.hosts)) {
      return send(res, 421, 'text/plain; charset=utf-8', 'unknown Host: use an IP address, localhost, or a name listed in http-hosts\n');
    }
    if (!this.authorized(req.headers.authorization)) {
      res.setHeader('www-authenticate', 'Basic realm="Ticketing admin", charset="UTF-8"');
      return send(res, 401, 'text/plain; charset=utf-8', 'admin token required (Authorization: Bearer <http-token>)\n');
    }
    switch (path) {
      case '/metrics':
        return send(res, 200, this.metrics.contentType, await this.metrics.render());
      case '/readyz': {
        const role = this.role();
        const ready = SERVING_ROLES.has(role);
        return send(res, ready ? 200 : 503, 'text/plain; charset=utf-8', `${ready ? 'ready' : 'not ready'} role=${role}\n`);
      }
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

  /** A node whose status cannot be read (while it stops, its listener is gone) is not ready. */
  private role(): string {
    try {
      return this.node.status().role;
    } catch {
      return 'unknown';
    }
  }

  private authorized(header: string | undefined): boolean {
    if (this.tokens.count === 0) return true;
    const given = presentedToken(header);
    return given !== undefined && this.tokens.matches(given);
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
