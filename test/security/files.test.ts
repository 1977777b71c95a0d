/**
 * Issue 25, findings 10, 11, 12 and 15: what a node does with its files and
 * where it listens, against real processes. One process per data directory,
 * enforced by the kernel (even across PID namespaces), and stopping never
 * removes another owner's lock; the data directory is 0700 and its files
 * 0600 whatever the umask; secret and config files others can read, and a
 * client listener off loopback without tokens, are warned about at start.
 */
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BIN, runCli, spawnReady, startServer, tempDir, Wire, type ReadyProcess, type RunningServer } from '@ticketing/test-support';

const running: Array<RunningServer | ReadyProcess> = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map(async (s) => s.stop('SIGKILL')));
});

async function start(args: string[]): Promise<RunningServer> {
  const s = await startServer(args, { memory: false });
  running.push(s);
  return s;
}

/** `ticketing server` run by `sh` under `umask`. */
async function startUnderUmask(umask: string, args: string[]): Promise<ReadyProcess> {
  const p = await spawnReady('/bin/sh', ['-c', `umask ${umask} && exec "$0" "$@"`, process.execPath, BIN, 'server', '--listen', '127.0.0.1:0', '--http', '127.0.0.1:0', ...args]);
  running.push(p);
  return p;
}

/** True when `unshare` can start a process in a new PID namespace here (root, or user namespaces). */
function canUnsharePid(): boolean {
  try {
    execFileSync('unshare', ['--pid', '--fork', 'true'], { stdio: 'ignore', timeout: 5_000 });
    return true;
  } catch {
    return false;
  }
}

describe('finding 10: one process per data directory', () => {
  it('refuses a second node on a running node\'s directory, even when the pid in LOCK looks dead to it', async () => {
    const dir = tempDir('ticketing-dd-');
    const first = await start(['--data-dir', dir]);
    const grant = await (await Wire.open(first.port)).ask('A dd/key 0 60');
    expect(grant).toMatch(/^A \d+ dd\/key$/);
    // What a node in another PID namespace sees: the owner's pid belongs to no process it can see.
    writeFileSync(join(dir, 'LOCK'), '999999999\n');
    const second = await runCli(['server', '--data-dir', dir, '--listen', '127.0.0.1:0', '--http', 'off'], 5_000);
    expect(second.code).toBe(2);
    expect(second.stderr).toMatch(/data directory .* is in use/);
    // The first node still serves its lock alone.
    expect(await (await Wire.open(first.port)).ask('A dd/key 0 60')).toBe('T dd/key');
  });

  it('refuses a node started in another PID namespace', async () => {
    if (!canUnsharePid()) {
      // Without namespaces the test above stands for it (what such a node sees is a dead pid).
      console.warn('unshare --pid is not available here: the PID-namespace variant cannot run');
      return;
    }
    const dir = tempDir('ticketing-dd-');
    await start(['--data-dir', dir]);
    // The second node runs in a PID namespace of its own, as in another container: it sees none of our processes.
    const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      let stderr = '';
      const child = spawn('unshare', ['--pid', '--fork', process.execPath, BIN, 'server', '--data-dir', dir, '--listen', '127.0.0.1:0', '--http', 'off'], { stdio: ['ignore', 'pipe', 'pipe'] });
      const timer = setTimeout(() => child.kill('SIGKILL'), 8_000);
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('exit', (code) => (clearTimeout(timer), resolve({ code, stderr })));
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/data directory .* is in use/);
  });

  it("stopping a node never removes a lock it does not hold", async () => {
    const dir = tempDir('ticketing-dd-');
    const first = await start(['--data-dir', dir]);
    writeFileSync(join(dir, 'LOCK'), '999999999\n');
    // The second start is refused; the first stops cleanly; then a new owner starts and keeps its lock.
    expect((await runCli(['server', '--data-dir', dir, '--listen', '127.0.0.1:0', '--http', 'off'], 5_000)).code).toBe(2);
    await first.stop('SIGTERM');
    running.splice(running.indexOf(first), 1);
    const second = await start(['--data-dir', dir]);
    expect(existsSync(join(dir, 'LOCK'))).toBe(true);
    const third = await runCli(['server', '--data-dir', dir, '--listen', '127.0.0.1:0', '--http', 'off'], 5_000);
    expect(third.code).toBe(2);
    await second.stop('SIGTERM');
    running.splice(running.indexOf(second), 1);
    // A stopped owner leaves the file (removing it could unlink a file a new owner has just locked) but not the lock.
    const fourth = await start(['--data-dir', dir]);
    expect(await (await Wire.open(fourth.port)).ask('P')).toBe('P');
  });
});

describe('finding 11: modes of the data directory', () => {
  it('creates the data directory 0700 and its files 0600 under umask 000', async () => {
    const parent = tempDir('ticketing-modes-');
    const dir = join(parent, 'data');
    const p = await startUnderUmask('000', ['--data-dir', dir]);
    const port = Number(/listen=\S+:(\d+)/.exec(p.readyLine)![1]);
    await (await Wire.open(port)).ask('A modes/key 0 60');
    await p.stop('SIGTERM');
    running.splice(running.indexOf(p), 1);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    for (const f of readdirSync(dir)) expect([f, statSync(join(dir, f)).mode & 0o777]).toEqual([f, 0o600]);
  });

  it('creates a Raft data directory and its files the same way', async () => {
    const dir = join(tempDir('ticketing-modes-'), 'raft');
    const p = await startUnderUmask('000', ['--data-dir', dir, '--mode', 'raft', '--node', 'solo']);
    await p.stop('SIGTERM');
    running.splice(running.indexOf(p), 1);
    const walk = (d: string): Array<[string, number]> =>
      readdirSync(d).flatMap((f) => {
        const path = join(d, f);
        const st = statSync(path);
        return st.isDirectory() ? [[path, st.mode & 0o777] as [string, number], ...walk(path)] : [[path, st.mode & 0o777] as [string, number]];
      });
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    for (const [path, mode] of walk(dir)) expect([path, mode]).toEqual([path, statSync(path).isDirectory() ? 0o700 : 0o600]);
  });
});

describe('finding 12: secret and config files others can read', () => {
  it('warns at start, naming the file (never its content)', async () => {
    const dir = tempDir('ticketing-secrets-');
    const tokenFile = join(dir, 'client.tokens');
    writeFileSync(tokenFile, 'client-0f3e2d1c4b5a69788796a5b4c3d2e1f0\n');
    chmodSync(tokenFile, 0o644);
    const config = join(dir, 'ticketing.yaml');
    writeFileSync(config, `listen: 127.0.0.1:0\nmemory: true\nhttp: 127.0.0.1:0\nclient-tokens-file: ${tokenFile}\n`);
    chmodSync(config, 0o666);
    const s = await startServer(['--config', config], { listen: false, memory: false });
    running.push(s);
    expect(s.stderr()).toMatch(new RegExp(`"level":"warn".*"file":"${tokenFile}".*readable by other users`));
    expect(s.stderr()).toMatch(new RegExp(`"level":"warn".*"file":"${config}".*(readable|writable) by other users`));
    expect(s.stderr()).not.toContain('client-0f3e2d1c');
  });
});

describe('finding 15: a client listener off loopback without client tokens', () => {
  it('starts with a warning', async () => {
    const s = await start(['--memory', '--listen', '0.0.0.0:0']);
    expect(s.stderr()).toMatch(/"level":"warn".*client listener .*without client tokens/);
    const quiet = await start(['--memory']);
    expect(quiet.stderr()).not.toMatch(/without client tokens/);
  });
});
