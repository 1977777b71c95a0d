/**
 * Issue 25, findings 5, 8 (client tokens) and 10 (F10): client identities
 * against a real server. A named identity releases only keys inside its
 * prefixes and only what it acquired, never a bare-token grant; an identity
 * without `keys` does not start silently; failed `H` attempts are
 * rate-limited per address and logged with their count.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, runCli, startServer, tempDir, Wire, type RunningServer } from '@ticketing/test-support';

const BARE = 'bare-0f3e2d1c4b5a69788796a5b4c3d2e1f0';
const APP = 'app-1f3e2d1c4b5a69788796a5b4c3d2e1f0';
const servers: RunningServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map(async (s) => s.stop('SIGKILL')));
});

async function withConfig(yaml: string): Promise<RunningServer> {
  const file = join(tempDir(), 'ticketing.yaml');
  writeFileSync(file, yaml, { mode: 0o600 });
  const s = await startServer(['--config', file]);
  servers.push(s);
  return s;
}

async function greeted(port: number, token: string): Promise<Wire> {
  const w = await Wire.open(port);
  expect(await w.ask(`H 1 ${token}`)).toMatch(/^H 1 /);
  return w;
}

describe('finding 5: a named identity cannot release what is not its own', () => {
  it("refuses a release outside its prefixes, and a bare token's grant inside them", async () => {
    const s = await withConfig(`client-tokens:\n  - ${BARE}\n  - name: app\n    token: ${APP}\n    keys: ['app/']\n`);
    const bare = await greeted(s.port, BARE);
    const outside = (await bare.ask('A other/k 0 60')).split(' ')[1]!;
    const inside = (await bare.ask('A app/k 0 60')).split(' ')[1]!;
    const app = await greeted(s.port, APP);
    // With the defect: R other/k (released), tokens being sequential it was found at once.
    expect(await app.ask(`R other/k ${outside}`)).toBe('E perm key outside the prefixes client app may use');
    const app2 = await greeted(s.port, APP);
    expect(await app2.ask(`R app/k ${inside}`)).toBe('N app/k');
    // Both locks are still held, and their holder can release them.
    expect(await bare.ask(`R other/k ${outside}`)).toBe('R other/k');
    expect(await bare.ask(`R app/k ${inside}`)).toBe('R app/k');
  });
});

describe('finding 10 (F10): an identity without keys', () => {
  it('is refused at start, with the way to allow every key', async () => {
    const dir = tempDir();
    const file = join(dir, 'ticketing.yaml');
    writeFileSync(file, `listen: 127.0.0.1:0\nmemory: true\nhttp: 'off'\nclient-tokens:\n  - name: app\n    token: ${APP}\n`, { mode: 0o600 });
    const r = await runCli(['server', '--config', file], 5_000);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/client-tokens entry 1 \(app\).*keys.*\[''\] for every key/);
    // keys: [''] says so explicitly, and then every key is allowed.
    const s = await withConfig(`client-tokens:\n  - name: app\n    token: ${APP}\n    keys: ['']\n`);
    const app = await greeted(s.port, APP);
    expect(await app.ask('A anything/at/all 0 60')).toMatch(/^A \d+ anything\/at\/all$/);
  });
});

describe('finding 8: guessing client tokens', () => {
  it('rate-limits failed H per address and logs the count at warn', async () => {
    const s = await withConfig(`client-tokens:\n  - ${BARE}\n`);
    const answers: string[] = [];
    const t0 = performance.now();
    for (let i = 0; i < 40; i++) {
      const w = await Wire.open(s.port);
      answers.push(await w.ask(`H 1 guess-${i}`).catch(() => '(closed)'));
      w.destroy();
    }
    // Each guess is refused; past the budget without even being compared, and the rate is bounded.
    expect(answers.every((a) => a.startsWith('E auth'))).toBe(true);
    expect(answers.filter((a) => /too many failed/.test(a)).length).toBeGreaterThan(0);
    expect(performance.now() - t0).toBeLessThan(20_000);
    await eventually('a warning with the count', () => /"level":"warn".*"failures":\d+.*failed client authentication/.test(s.stderr()), 3_000);
    // The right token from the same address is still refused while the address is over its budget...
    const right = await Wire.open(s.port);
    expect(await right.ask(`H 1 ${BARE}`)).toMatch(/^E auth too many failed/);
    right.destroy();
  });
});
