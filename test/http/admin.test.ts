/**
 * The admin HTTP listener, black-box: the ready line, probes, status JSON,
 * every metric moving with the traffic that should move it, the admin
 * token, and the pages being served.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startServer, tokenOf, Wire } from '@ticketing/test-support';
import { get, startWithAdmin, type AdminServer } from './admin.js';

describe('ready line', () => {
  it('ends with http=HOST:PORT when the admin listener is on, other fields unchanged', async () => {
    const s = await startWithAdmin(['--node', 'n1']);
    expect(s.readyLine).toMatch(/^ready role=single node=n1 listen=127\.0\.0\.1:\d+ http=127\.0\.0\.1:\d+$/);
    expect(s.http).not.toBe(s.address);
    await s.stop();
  });

  it('has no http= with --http off', async () => {
    const s = await startServer(['--node', 'n1', '--http', 'off']);
    expect(s.readyLine).toMatch(/^ready role=single node=n1 listen=127\.0\.0\.1:\d+$/);
    await s.stop();
  });

  it('comes only once SIGTERM is handled: a stop sent at once is graceful (exit 0)', async () => {
    for (let i = 0; i < 8; i++) {
      const s = await startWithAdmin();
      expect(await s.stop('SIGTERM')).toBe(0);
    }
  });

  it('refuses to start (exit 2) when the admin address is taken', async () => {
    const first = await startWithAdmin();
    await expect(startServer(['--http', first.http])).rejects.toThrow(/exited \(2\).*cannot start.*EADDRINUSE/s);
    await first.stop();
  });
});

describe('probes, status and pages', () => {
  let s: AdminServer;
  beforeAll(async () => {
    s = await startWithAdmin(['--node', 'probe-node', '--client-tokens', 'client-secret-1,client-secret-2', '--max-locks', '77']);
  });
  afterAll(async () => {
    await s.stop();
  });

  it('/healthz and /readyz answer 200 for a single node', async () => {
    expect(await get(s.http, '/healthz')).toMatchObject({ status: 200, text: 'ok\n' });
    expect(await get(s.http, '/readyz')).toMatchObject({ status: 200, text: 'ready role=single\n' });
  });

  it('/status is JSON with version, uptime, role, peers, counts and a config summary without secrets', async () => {
    const w = await Wire.open(s.port);
    await w.ask('H 1 client-secret-1');
    tokenOf(await w.ask('A status/key 0 30'));
    const reply = await get(s.http, '/status');
    expect(reply.status).toBe(200);
    expect(reply.headers.get('content-type')).toMatch(/^application\/json/);
    const status = JSON.parse(reply.text) as Record<string, unknown>;
    expect(status).toMatchObject({
      node: 'probe-node',
      mode: 'single',
      role: 'single',
      listen: s.address,
      peers: [],
      locks: { held: 1, waiting: 0 },
      connections: 1,
      contended: [],
      config: { 'client-tokens': 2, 'max-locks': 77 },
    });
    expect(status.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(status.uptimeMs).toBeGreaterThanOrEqual(0);
    expect(reply.text).not.toContain('client-secret');
    w.destroy();
  });

  it('serves the dashboard at /, the deployment page at /deploy and their scripts, with a CSP that allows no other origin', async () => {
    const dash = await get(s.http, '/');
    expect(dash.status).toBe(200);
    expect(dash.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(dash.text).toContain('<script type="module" src="/assets/dashboard.js">');
    expect(dash.headers.get('content-security-policy')).toContain("default-src 'self'");
    expect((await get(s.http, '/deploy')).text).toContain('Ticketing server deployment');
    const js = await get(s.http, '/assets/deploy.js');
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(js.text).toContain("from './deploy-model.js'");
    expect((await get(s.http, '/assets/style.css')).status).toBe(200);
  });

  it('answers 404 to unknown paths (no way out of the assets) and 405 to other methods', async () => {
    for (const path of ['/nope', '/assets/../package.json', '/assets/%2e%2e/package.json', '/assets/deploy.d.ts', '/assets/']) {
      expect((await get(s.http, path)).status, path).toBe(404);
    }
    const post = await get(s.http, '/metrics', {}, 'POST');
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    expect((await get(s.http, '/metrics', {}, 'HEAD')).status).toBe(200);
  });
});

describe('/readyz while stopping', () => {
  it('answers 503 during a graceful shutdown', async () => {
    const s = await startWithAdmin();
    // A client that never closes its side keeps the shutdown in its grace period.
    const stubborn = connect({ port: s.port, host: s.host, allowHalfOpen: true });
    stubborn.on('error', () => {});
    await new Promise((resolve) => stubborn.once('connect', resolve));
    s.proc.kill('SIGTERM');
    await eventually('/readyz answering 503', async () => (await get(s.http, '/readyz')).status === 503, 3_000);
    // 'unknown': TicketingNode.status() throws once its client listener is closed.
    expect((await get(s.http, '/readyz')).text).toMatch(/^not ready role=(stopping|unknown)\n$/);
    stubborn.destroy();
    expect(await s.exited).toBe(0);
  });
});

describe('admin token', () => {
  let s: AdminServer;
  const token = 'admin-secret-42';
  beforeAll(async () => {
    s = await startWithAdmin(['--http-token', token]);
  });
  afterAll(async () => {
    await s.stop();
  });

  it('is not needed for /healthz', async () => {
    expect((await get(s.http, '/healthz')).status).toBe(200);
  });

  it('is not needed for /readyz: readiness probes and load balancers cannot send one', async () => {
    expect(await get(s.http, '/readyz')).toMatchObject({ status: 200, text: 'ready role=single\n' });
  });

  it('is needed for everything else, and a browser is asked for it (Basic)', async () => {
    for (const path of ['/metrics', '/status', '/history', '/', '/deploy', '/assets/dashboard.js', '/nope']) {
      const reply = await get(s.http, path);
      expect(reply.status, path).toBe(401);
      expect(reply.headers.get('www-authenticate'), path).toMatch(/^Basic realm=/);
    }
    expect((await get(s.http, '/metrics', { authorization: 'Bearer wrong' })).status).toBe(401);
    expect((await get(s.http, '/metrics', { authorization: `Bearer ${token}x` })).status).toBe(401);
    expect((await get(s.http, '/metrics', { authorization: token })).status).toBe(401);
  });

  it('is accepted as a Bearer token or as the password of HTTP Basic', async () => {
    expect((await get(s.http, '/metrics', { authorization: `Bearer ${token}` })).status).toBe(200);
    const basic = Buffer.from(`anyone:${token}`).toString('base64');
    expect((await get(s.http, '/status', { authorization: `Basic ${basic}` })).status).toBe(200);
  });

  it('never appears in /status', async () => {
    const reply = await get(s.http, '/status', { authorization: `Bearer ${token}` });
    expect(reply.text).not.toContain(token);
  });
});
