/**
 * The `ticketing` command as a whole: --version, help, and behaviour shared
 * by every subcommand (a closed stdout, one name per meaning for flags).
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BIN, freePort, REPO, runCli, startServer, tempDir, type RunningServer } from '@ticketing/test-support';
import { startWithAdmin } from '../http/admin.js';

/** Servers a test started; stopped after it even when it failed. */
const running: RunningServer[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map(async (s) => s.stop()));
});
async function started<T extends RunningServer>(s: Promise<T>): Promise<T> {
  const server = await s;
  running.push(server);
  return server;
}

const VERSION = (JSON.parse(readFileSync(join(REPO, 'packages/cli/package.json'), 'utf8')) as { version: string }).version;

describe('ticketing --version', () => {
  it.each(['--version', '-V'])('%s prints the version, the wire protocol and the Node.js, and exits 0', async (flag) => {
    const r = await runCli([flag]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`ticketing ${VERSION} (wire protocol 1, Node.js ${process.version})\n`);
  });
});

describe('a closed stdout', () => {
  it('`ticketing status | head` ends quietly, with no EPIPE stack trace', async () => {
    const s = await started(startWithAdmin(['--node', 'pipe-1']));
    const proc = spawn(process.execPath, [BIN, 'status', '--addr', s.http], { stdio: ['ignore', 'pipe', 'pipe'] });
    proc.stdout.destroy(); // the reader went away before anything was written
    let stderr = '';
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => proc.on('exit', (c) => resolve(c)));
    expect(stderr).toBe('');
    expect(code).toBe(0);
  });
});

/** A node whose admin listener is at its client port + 4000, the default layout, on free ports. */
async function startAtDefaultLayout(name: string): Promise<RunningServer> {
  for (;;) {
    const port = await freePort();
    if (port + 4000 > 65_535) continue;
    try {
      return await startServer(['--node', name, '--listen', `127.0.0.1:${port}`, '--http', `127.0.0.1:${port + 4000}`]);
    } catch {
      // port + 4000 was taken: another pair
    }
  }
}

describe('--addr is a client address and --http an admin address', () => {
  it('status --http reads the admin listener', async () => {
    const s = await started(startWithAdmin(['--node', 'http-1']));
    const r = await runCli(['status', '--http', s.http]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^http-1 +single /m);
  });

  it("status --addr given a client address finds that node's admin listener", async () => {
    const s = await started(startAtDefaultLayout('addr-1'));
    const r = await runCli(['status', '--addr', s.address]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^addr-1 +single +${s.address} .* ${s.http}$`, 'm'));
  });

  it('status --addr given a client address whose admin listener is elsewhere says in one line to use --http', async () => {
    const s = await started(startWithAdmin(['--node', 'addr-2']));
    const r = await runCli(['status', '--addr', s.address]);
    expect(r.code).toBe(1);
    expect(r.stdout).not.toContain('HPE_');
    const line = r.stdout.split('\n').find((l) => l.includes(s.address) && l.startsWith('?'));
    expect(line).toMatch(/client address.*--http/);
  });

  it('status --addr given an admin address (as before --http existed) keeps working', async () => {
    const s = await started(startWithAdmin(['--node', 'addr-3']));
    const r = await runCli(['status', '--addr', s.http]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^addr-3 +single /m);
  });
});

describe('every secret has a flag, a -file flag and an environment variable', () => {
  it('status takes the admin token from --http-token, --http-token-file, TICKETING_HTTP_TOKEN and TICKETING_HTTP_TOKEN_FILE', async () => {
    const s = await started(startWithAdmin(['--node', 'sec-1', '--http-token', 'adm-tok']));
    const file = join(tempDir(), 'http.token');
    writeFileSync(file, 'adm-tok\n');
    const ok = /^sec-1 +single /m;
    expect((await runCli(['status', '--http', s.http, '--http-token', 'adm-tok'])).stdout).toMatch(ok);
    expect((await runCli(['status', '--http', s.http, '--http-token-file', file])).stdout).toMatch(ok);
    expect((await runCli(['status', '--http', s.http], 10_000, { TICKETING_HTTP_TOKEN: 'adm-tok' })).stdout).toMatch(ok);
    expect((await runCli(['status', '--http', s.http], 10_000, { TICKETING_HTTP_TOKEN_FILE: file })).stdout).toMatch(ok);
    const both = await runCli(['status', '--http', s.http, '--http-token', 'adm-tok', '--http-token-file', file]);
    expect(both.code).toBe(2);
    expect(both.stderr).toBe('ticketing status: give --http-token or --http-token-file, not both\n');
  });
});

describe('ticketing lock and verify: addresses, tokens, refused connections', () => {
  it('lock gives up at once (exit 69) when every address refuses the connection, not after the 5 s connect timeout', async () => {
    const port = await freePort(); // nothing listens there
    const started = Date.now();
    const r = await runCli(['lock', '--addr', `127.0.0.1:${port}`, 'k', '--', process.execPath, '-e', '']);
    expect(r.code).toBe(69);
    expect(r.stderr).toMatch(/ECONNREFUSED|refused/);
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it('verify defaults to the default server address and says so when nothing is there', async () => {
    const r = await runCli(['verify', '--duration', '1'], 10_000, { TICKETING_ADDR: `127.0.0.1:${await freePort()}` });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^ticketing verify: cannot reach a serving node \(127\.0\.0\.1:\d+: ECONNREFUSED\)\n$/);
  });

  it('lock and verify take the client token from --token, --token-file, TICKETING_CLIENT_TOKEN and TICKETING_CLIENT_TOKEN_FILE', async () => {
    const s = await started(startServer(['--client-tokens', 'cli-tok']));
    const file = join(tempDir(), 'client.token');
    writeFileSync(file, 'cli-tok\n');
    const lock = async (args: string[], env: NodeJS.ProcessEnv = {}) =>
      runCli(['lock', '--addr', s.address, ...args, 'sec/k', '--', process.execPath, '-e', 'process.exit(process.env.TICKETING_TOKEN ? 7 : 1)'], 10_000, env);
    expect((await lock([])).code).toBe(77); // refused: no token
    expect((await lock(['--token', 'cli-tok'])).code).toBe(7);
    expect((await lock(['--token-file', file])).code).toBe(7);
    expect((await lock([], { TICKETING_CLIENT_TOKEN: 'cli-tok' })).code).toBe(7);
    expect((await lock([], { TICKETING_CLIENT_TOKEN_FILE: file })).code).toBe(7);
    const verify = await runCli(['verify', '--duration', '1', '--clients', '2', '--keys', '1'], 20_000, { TICKETING_ADDR: s.address, TICKETING_CLIENT_TOKEN_FILE: file });
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
  });
});

describe('ticketing server --help', () => {
  it('shows each flag with its default, its allowed values and its environment variable', async () => {
    const r = await runCli(['server', '--help']);
    expect(r.code).toBe(0);
    const help = r.stdout.replace(/\s+/g, ' ');
    expect(help).toContain('--listen <value> Client listener, HOST:PORT (port 0 picks a free port). (default: 127.0.0.1:5225)');
    expect(help).toContain('(default: priority; one of: priority, raft)');
    expect(help).toContain('--max-locks <value> Most keys held at once; B beyond it. (default: 1000000; allowed: 1..100000000)');
    expect(help).toContain('(default: info; one of: debug, info, warn, error)');
    expect(help).toMatch(/--peer-token <value> .*\(env: TICKETING_PEER_TOKEN\)/);
    expect(help).toMatch(/--http-token <value> .*\(env: TICKETING_HTTP_TOKEN\)/);
  });
});

describe('npm run bench -- --help', () => {
  const bench = async (args: string[]) => {
    const { spawnSync } = await import('node:child_process');
    return spawnSync(process.execPath, [join(REPO, 'packages/bench/dist/run.js'), ...args], { encoding: 'utf8', timeout: 10_000 });
  };

  it('prints the usage, the scenarios and the flags, and runs nothing', async () => {
    const r = await bench(['--help']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^usage: npm run bench -- /);
    for (const word of ['--only', '--duration', '--warmup', '--rounds', 'pairs', 'hotkey', 'raft', 'client']) expect(r.stdout).toContain(word);
    expect(r.stdout).not.toContain('== ');
  });

  it('refuses an unknown flag or scenario in one line, exit 2', async () => {
    const flag = await bench(['--bogus']);
    expect(flag.status).toBe(2);
    expect(flag.stderr).toMatch(/^bench: unknown option '--bogus' \(run with --help for usage\)\n$/);
    const scenario = await bench(['--only', 'pairz']);
    expect(scenario.status).toBe(2);
    expect(scenario.stderr).toMatch(/^bench: unknown scenario "pairz" in --only; one of: pairs, extend, hotkey, .*, peertls, client \(run with --help for usage\)\n$/);
  });
});
