/** `ticketing locks` and `ticketing release`, black-box, against a real node's admin listener. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, runCli, tempDir, tokenOf, Wire } from '@ticketing/test-support';
import { startWithAdmin, type AdminServer } from './admin.js';

describe('ticketing locks', () => {
  let s: AdminServer;
  const tokens = new Map<string, bigint>();
  beforeAll(async () => {
    s = await startWithAdmin();
    const w = await Wire.open(s.port);
    for (const key of ['jobs/b', 'jobs/a', 'other']) tokens.set(key, tokenOf(await w.ask(`A ${key} 0 60`)));
    w.send('A jobs/a 30 10\n');
    await new Promise((r) => setTimeout(r, 100));
  });
  afterAll(async () => {
    await s.stop();
  });

  it('prints held locks in key order with token, holder, remaining lease, held since and waiters', async () => {
    const r = await runCli(['locks', '--http', s.http]);
    expect(r.code).toBe(0);
    const [header, ...rows] = r.stdout.trimEnd().split('\n');
    expect(header!.split(/\s{2,}/)).toEqual(['KEY', 'TOKEN', 'HOLDER', 'REMAINING', 'HELD SINCE', 'WAITERS']);
    expect(rows.slice(0, 3).map((row) => row.split(/\s{2,}/))).toEqual([
      ['jobs/a', tokens.get('jobs/a')!.toString(), '-', expect.stringMatching(/^\d+\.\d s$/), expect.stringMatching(/^\d{4}-\d\d-\d\dT/), '1'],
      ['jobs/b', tokens.get('jobs/b')!.toString(), '-', expect.stringMatching(/ s$/), expect.any(String), '0'],
      ['other', tokens.get('other')!.toString(), '-', expect.stringMatching(/ s$/), expect.any(String), '0'],
    ]);
    expect(rows[3]).toBe(`3 of 3 held locks on ${s.http}`);
  });

  it('filters by prefix, stops at --limit, and prints JSON with --json', async () => {
    const r = await runCli(['locks', 'jobs/', '--http', s.http, '--limit', '1', '--json']);
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n').map((l) => JSON.parse(l) as { key: string; token: string });
    expect(lines).toEqual([expect.objectContaining({ key: 'jobs/a', token: tokens.get('jobs/a')!.toString(), waiters: 1 })]);
  });

  it('skips an address that does not answer and uses the next; exits 69 when none serves', async () => {
    const dead = `127.0.0.1:${await freePort()}`;
    const ok = await runCli(['locks', '--http', `${dead},${s.http}`]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain('jobs/a');
    const none = await runCli(['locks', '--http', dead]);
    expect(none.code).toBe(69);
    expect(none.stderr).toMatch(/no admin address answered as the serving node: 127\.0\.0\.1:\d+: ECONNREFUSED/);
  });

  it('refuses a force-release when the node has no http-token: exit 77, the lock stays', async () => {
    const r = await runCli(['release', 'other', '--http', s.http]);
    expect(r.code).toBe(77);
    expect(r.stderr).toMatch(/http-token/);
    expect((await runCli(['locks', 'other', '--http', s.http, '--json'])).stdout).toContain(tokens.get('other')!.toString());
  });
});

describe('ticketing release', () => {
  let s: AdminServer;
  let tokenFile: string;
  beforeAll(async () => {
    const dir = tempDir();
    tokenFile = join(dir, 'http.token');
    writeFileSync(tokenFile, 'rel-secret\n');
    s = await startWithAdmin(['--http-token', 'rel-secret']);
  });
  afterAll(async () => {
    await s.stop();
  });

  it('releases the grant holding KEY now (no --token), which passes to the waiter; the old token is fenced out', async () => {
    const holder = await Wire.open(s.port);
    const token = tokenOf(await holder.ask('A stuck 0 60'));
    const waiter = await Wire.open(s.port);
    waiter.send('A stuck 30 30\n');
    await new Promise((r) => setTimeout(r, 100));
    const r = await runCli(['release', 'stuck', '--http', s.http, '--http-token-file', tokenFile, '--by', 'test-operator']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`released stuck (token ${token})\n`);
    expect(tokenOf(await waiter.line())).toBeGreaterThan(token);
    expect(await holder.ask(`R stuck ${token}`)).toBe('N stuck');
    expect(s.stderr()).toMatch(/test-operator/);
  });

  it('releases only the named token: another one is exit 1 and nothing changes; a free key is exit 1', async () => {
    const w = await Wire.open(s.port);
    const token = tokenOf(await w.ask('A named 0 60'));
    process.env.TICKETING_HTTP_TOKEN = 'rel-secret';
    try {
      const wrong = await runCli(['release', 'named', '--token', (token + 1n).toString(), '--http', s.http]);
      expect(wrong.code).toBe(1);
      expect(wrong.stderr).toContain(`held under token ${token}`);
      expect(await w.ask(`X named ${token} 60`)).toBe('X named');
      expect((await runCli(['release', 'named', '--token', token.toString(), '--http', s.http])).code).toBe(0);
      const free = await runCli(['release', 'named', '--http', s.http]);
      expect(free.code).toBe(1);
      expect(free.stderr).toContain('named is not held');
    } finally {
      delete process.env.TICKETING_HTTP_TOKEN;
    }
  });

  it('needs the admin token (exit 77), and names bad usage (exit 2)', async () => {
    const w = await Wire.open(s.port);
    tokenOf(await w.ask('A guarded 0 60'));
    const none = await runCli(['release', 'guarded', '--http', s.http]);
    expect(none.code).toBe(77);
    expect(none.stderr).toMatch(/admin token required or wrong/);
    expect((await runCli(['release', 'guarded', '--token', 'x1', '--http', s.http, '--http-token', 'rel-secret'])).code).toBe(2);
    expect((await runCli(['release', 'bad key', '--http', s.http])).code).toBe(2);
    expect((await runCli(['release', 'guarded', '--http', 'nonsense'])).code).toBe(2);
  });
});
