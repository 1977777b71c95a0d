/**
 * The admin listener's locks API, black-box: held locks with holder, token,
 * remaining lease, held since and waiters, paged in key order; one lock with
 * its queue (identities only for an authenticated admin); and the audited
 * force-release, refused without the http-token (none configured, missing,
 * Basic instead of Bearer) and replicated, logged and counted with it.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, tempDir, tokenOf, Wire } from '@ticketing/test-support';
import { get, scrape, startWithAdmin, type AdminServer } from './admin.js';

interface LockJson {
  key: string;
  token: string;
  holder: string | null;
  leaseMs: number;
  remainingMs: number;
  heldSince: string;
  waiters: number;
}

const json = <T>(text: string): T => JSON.parse(text) as T;
const path = (key: string, rest = '') => `/locks/${encodeURIComponent(key)}${rest}`;

async function post(http: string, p: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  const res = await fetch(`http://${http}${p}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: res.status, text: await res.text() };
}

describe('GET /locks and /locks/KEY with no http-token', () => {
  let s: AdminServer;
  let w: Wire;
  const tokens = new Map<string, bigint>();
  beforeAll(async () => {
    s = await startWithAdmin();
    w = await Wire.open(s.port);
    for (const key of ['b/2', 'a/1', 'b/1', 'c', 'b/3', 'é/ü']) tokens.set(key, tokenOf(await w.ask(`A ${key} 0 60`)));
  });
  afterAll(async () => {
    await s.stop();
  });

  it('lists held locks in key order with token, holder, lease, remaining lease and held since', async () => {
    const before = Date.now();
    const reply = await get(s.http, '/locks');
    expect(reply.status).toBe(200);
    expect(reply.headers.get('content-type')).toMatch(/^application\/json/);
    const body = json<{ serving: boolean; role: string; matched: number; locks: LockJson[]; next: string | null }>(reply.text);
    expect(body).toMatchObject({ serving: true, role: 'single', matched: 6, next: null });
    expect(body.locks.map((l) => l.key)).toEqual(['a/1', 'b/1', 'b/2', 'b/3', 'c', 'é/ü']);
    const a1 = body.locks[0]!;
    expect(a1).toMatchObject({ token: tokens.get('a/1')!.toString(), holder: null, leaseMs: 60_000, waiters: 0 });
    expect(a1.remainingMs).toBeGreaterThan(50_000);
    expect(a1.remainingMs).toBeLessThanOrEqual(60_000);
    expect(Date.parse(a1.heldSince)).toBeLessThanOrEqual(before + 1_000);
    expect(Date.parse(a1.heldSince)).toBeGreaterThan(before - 60_000);
  });

  it('pages with limit and after, and filters by prefix', async () => {
    const first = json<{ locks: LockJson[]; next: string }>((await get(s.http, '/locks?limit=2')).text);
    expect(first.locks.map((l) => l.key)).toEqual(['a/1', 'b/1']);
    expect(first.next).toBe('b/1');
    const second = json<{ locks: LockJson[]; next: string | null }>((await get(s.http, `/locks?limit=2&after=${encodeURIComponent(first.next)}`)).text);
    expect(second.locks.map((l) => l.key)).toEqual(['b/2', 'b/3']);
    const prefixed = json<{ matched: number; locks: LockJson[]; next: string | null }>((await get(s.http, '/locks?prefix=b%2F&limit=2&after=b%2F1')).text);
    expect(prefixed).toMatchObject({ matched: 3, next: null });
    expect(prefixed.locks.map((l) => l.key)).toEqual(['b/2', 'b/3']);
  });

  it('refuses bad paging values with 400 and a reason', async () => {
    for (const q of ['limit=0', 'limit=1001', 'limit=x', `prefix=${'p'.repeat(251)}`]) {
      const reply = await get(s.http, `/locks?${q}`);
      expect(reply.status, q).toBe(400);
      expect(json<{ error: string }>(reply.text).error).toMatch(/limit|prefix/);
    }
    expect((await get(s.http, '/locks/bad%20key')).status).toBe(400);
    expect((await get(s.http, '/locks/%E0%A4%A')).status).toBe(400);
  });

  it('shows one lock with its queue (no waiter identities without an admin token), 404 when not held', async () => {
    const b = await Wire.open(s.port);
    b.send('A c 30 10\n');
    await eventually('queued', async () => json<LockJson>((await get(s.http, path('c'))).text).waiters === 1);
    const one = json<LockJson & { queue: Array<Record<string, unknown>> }>((await get(s.http, path('c'))).text);
    expect(one).toMatchObject({ key: 'c', token: tokens.get('c')!.toString(), waiters: 1 });
    expect(one.queue).toHaveLength(1);
    expect(one.queue[0]).toMatchObject({ position: 1, leaseMs: 10_000 });
    expect(one.queue[0]!.waitLeftMs).toBeGreaterThan(20_000);
    expect(one.queue[0]).not.toHaveProperty('identity');
    expect(one.queue[0]).not.toHaveProperty('remote');
    expect(json<LockJson>((await get(s.http, path('é/ü'))).text).token).toBe(tokens.get('é/ü')!.toString());
    expect((await get(s.http, path('nobody-holds-this'))).status).toBe(404);
  });

  it('refuses a force-release when no http-token is configured, even on loopback: 403, nothing changes', async () => {
    const reply = await post(s.http, path('a/1', '/release'), { token: tokens.get('a/1')!.toString() });
    expect(reply.status).toBe(403);
    expect(reply.text).toMatch(/http-token/);
    expect(json<LockJson>((await get(s.http, path('a/1'))).text).token).toBe(tokens.get('a/1')!.toString());
    expect((await scrape(s.http)).value('ticketing_forced_releases_total')).toBe(0);
  });

  it('answers other methods with 405', async () => {
    expect((await get(s.http, '/locks', {}, 'DELETE')).status).toBe(405);
    expect((await post(s.http, '/locks', {})).status).toBe(405);
    expect((await post(s.http, path('a/1'), {})).status).toBe(405);
  });
});

describe('with an http-token and named client identities', () => {
  let s: AdminServer;
  const admin = { authorization: 'Bearer admin-secret' };
  beforeAll(async () => {
    const dir = tempDir();
    const config = join(dir, 'ticketing.yaml');
    writeFileSync(
      config,
      ['client-tokens:', '  - name: billing', '    token: tok-billing', '    keys: ["orders/"]', '  - name: reports', '    token: tok-reports', '    keys: ["orders/"]', 'http-token: admin-secret', ''].join('\n'),
      { mode: 0o600 }, // it holds secrets: the server refuses a file others can read
    );
    s = await startWithAdmin(['--config', config]);
  });
  afterAll(async () => {
    await s.stop();
  });

  it('needs the token to read, names the holder, and shows waiter identities to the admin', async () => {
    const billing = await Wire.open(s.port);
    await billing.ask('H 1 tok-billing');
    const token = tokenOf(await billing.ask('A orders/7 0 60'));
    const reports = await Wire.open(s.port);
    await reports.ask('H 1 tok-reports');
    reports.send('A orders/7 30 10\n');
    expect((await get(s.http, '/locks')).status).toBe(401);
    await eventually('queued', async () => json<LockJson>((await get(s.http, path('orders/7'), admin)).text).waiters === 1);
    const one = json<LockJson & { queue: Array<Record<string, unknown>> }>((await get(s.http, path('orders/7'), admin)).text);
    expect(one).toMatchObject({ token: token.toString(), holder: 'billing' });
    expect(one.queue[0]!.identity).toBe('reports');
    expect(one.queue[0]!.remote).toMatch(/^127\.0\.0\.1:\d+$/);
    // Basic (what a browser remembers) reads too.
    const basic = { authorization: `Basic ${Buffer.from('ops:admin-secret').toString('base64')}` };
    expect((await get(s.http, '/locks', basic)).status).toBe(200);
  });

  it('force-releases exactly the named grant, whoever acquired it: it passes to the waiter, and is logged and counted', async () => {
    const billing = await Wire.open(s.port);
    await billing.ask('H 1 tok-billing');
    const token = tokenOf(await billing.ask('A orders/9 0 60'));
    const reports = await Wire.open(s.port);
    await reports.ask('H 1 tok-reports');
    reports.send('A orders/9 30 10\n');
    await eventually('queued', async () => json<LockJson>((await get(s.http, path('orders/9'), admin)).text).waiters === 1);
    const release = path('orders/9', '/release');
    // Refused: no token, Basic credentials (a browser sends those by itself), a wrong token.
    expect((await post(s.http, release, { token: token.toString() })).status).toBe(401);
    expect((await post(s.http, release, { token: token.toString() }, { authorization: `Basic ${Buffer.from('ops:admin-secret').toString('base64')}` })).status).toBe(401);
    expect((await post(s.http, release, { token: token.toString() }, { authorization: 'Bearer wrong' })).status).toBe(401);
    // Bad bodies: 400, nothing changes.
    for (const body of ['not json', '[]', { token: 'x' }, { token: '0' }, { token: '18446744073709551616' }, {}]) {
      expect((await post(s.http, release, body, admin)).status, JSON.stringify(body)).toBe(400);
    }
    // Another token: 409 with the current one.
    const wrong = await post(s.http, release, { token: (token + 1n).toString() }, admin);
    expect(wrong.status).toBe(409);
    expect(json<{ current: string }>(wrong.text).current).toBe(token.toString());
    const ok = await post(s.http, release, { token: token.toString(), by: 'alice@ops-host' }, admin);
    expect(ok.status).toBe(200);
    expect(json<{ released: boolean }>(ok.text)).toMatchObject({ key: 'orders/9', token: token.toString(), released: true });
    const handed = await reports.line();
    expect(tokenOf(handed)).toBeGreaterThan(token);
    expect(await billing.ask(`R orders/9 ${token}`)).toBe('N orders/9');
    await eventually('logged at warn with who asked', () => /"level":"warn".*"key":"orders\/9".*"by":"alice@ops-host".*force-released/.test(s.stderr()) || /force-released.*alice@ops-host/.test(s.stderr()));
    expect((await scrape(s.http, admin)).value('ticketing_forced_releases_total')).toBe(1);
    expect((await post(s.http, release, { token: token.toString() }, admin)).status).toBe(409);
  });
});
