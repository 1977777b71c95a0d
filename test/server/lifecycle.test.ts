/**
 * The server process: restarts (SIGKILL included), graceful shutdown, the
 * data directory, token reservation, and start-up errors.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, startServer, tempDir, tokenOf, Wire } from '@ticketing/test-support';

async function grantOnce(port: number, key = 'k'): Promise<bigint> {
  const w = await Wire.open(port);
  const token = tokenOf(await w.ask(`A ${key} 0 1`));
  w.destroy();
  return token;
}

describe('restarts', () => {
  it('issues larger tokens after a SIGKILL restart with a data directory', async () => {
    const dir = tempDir();
    let last = 0n;
    for (let run = 0; run < 3; run++) {
      const s = await startServer(['--data-dir', dir, '--token-reserve', '1000']);
      // Use more tokens than one reservation block, so the reservation moves on.
      const w = await Wire.open(s.port);
      for (let i = 0; i < 1500; i++) {
        const token = tokenOf(await w.ask(`A k${i} 0 1`));
        expect(token).toBeGreaterThan(last);
        last = token;
      }
      expect(await s.stop('SIGKILL')).toBe('SIGKILL');
    }
    // The durable mark is the larger of the two reservation files (start-up and background).
    // Each file holds the mark and the mode that issued it (`<token> single`).
    const marks = ['token-high-water', 'token-high-water.ahead'].map((f) => BigInt(readFileSync(join(dir, f), 'utf8').trim().split(' ')[0]!));
    expect(marks.reduce((a, b) => (a > b ? a : b))).toBeGreaterThan(last);
  });

  it('issues larger tokens after a SIGKILL restart with --memory (Unix microseconds)', async () => {
    const before = BigInt(Date.now()) * 1000n;
    const s1 = await startServer();
    const t1 = await grantOnce(s1.port);
    expect(t1).toBeGreaterThanOrEqual(before);
    await s1.stop('SIGKILL');
    const s2 = await startServer();
    const t2 = await grantOnce(s2.port);
    expect(t2).toBeGreaterThan(t1);
    await s2.stop();
  });

  it('refuses a data directory another running node holds, and takes over one left by a killed node', async () => {
    const dir = tempDir();
    const s1 = await startServer(['--data-dir', dir]);
    const second = await runCli(['server', '--listen', '127.0.0.1:0', '--data-dir', dir]);
    expect(second.code).toBe(2);
    expect(second.stderr).toMatch(/data directory .* is in use by another process \(pid \d+, node \S+, since /);
    expect(second.stderr.trim().split('\n')).toHaveLength(1);
    await s1.stop('SIGKILL');
    const s2 = await startServer(['--data-dir', dir]);
    await s2.stop();
  });

  it('refuses to start on a corrupt high-water file rather than risk repeating a token', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'token-high-water'), 'garbage\n');
    const r = await runCli(['server', '--listen', '127.0.0.1:0', '--data-dir', dir]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/token-high-water is corrupt/);
  });

  it('stops serving grants with a clear error when the token reservation cannot be written', async () => {
    const dir = tempDir();
    const s = await startServer(['--data-dir', dir, '--token-reserve', '1000']);
    const w = await Wire.open(s.port);
    expect(await w.ask('A first 0 30')).toMatch(/^A /);
    // Make the data directory unwritable in a way root cannot ignore: replace it by a file.
    rmSync(dir, { recursive: true, force: true });
    writeFileSync(dir, 'not a directory');
    const tokens: bigint[] = [];
    let last = '';
    for (let i = 0; i < 2000; i++) {
      last = await w.ask(`A x${i} 0 30`).catch(() => 'closed');
      if (!last.startsWith('A ')) break;
      tokens.push(tokenOf(last));
    }
    expect(last).toMatch(/^E unavailable cannot reserve fencing tokens: /);
    expect(await s.exited).toBe(1);
    expect(s.stderr()).toMatch(/cannot reserve fencing tokens/);
    // Nothing at or above the last durable mark was issued: at most one block was used.
    expect(tokens.length).toBeLessThan(1000);
    rmSync(dir, { force: true });
  });
});

describe('graceful shutdown', () => {
  it('answers waiting acquires T, then E unavailable, closes, and exits 0 on SIGTERM and SIGINT', async () => {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      const s = await startServer();
      const holder = await Wire.open(s.port);
      await holder.ask('A k 0 30');
      const waiter = await Wire.open(s.port);
      waiter.send('A k 30 30\nA j 0 30\n');
      expect(await waiter.line()).toMatch(/^A \d+ j$/);
      s.proc.kill(signal);
      expect(await waiter.line()).toBe('T k');
      expect(await waiter.line()).toBe('E unavailable shutting down');
      expect(await waiter.closedWithin()).toBe(true);
      expect(await holder.line()).toBe('E unavailable shutting down');
      expect(await s.exited).toBe(0);
      // It no longer accepts.
      await expect(Wire.open(s.port)).rejects.toThrow();
    }
  });
});

describe('reload', () => {
  it('applies new client tokens and limits on SIGHUP without dropping connections or locks', async () => {
    const dir = tempDir();
    const file = join(dir, 'ticketing.yaml');
    writeFileSync(file, 'memory: true\nclient-tokens: [old-token]\nmax-locks: 1\n');
    const s = await startServer(['--config', file], { memory: false });
    const kept = await Wire.open(s.port);
    expect(await kept.ask('H 1 old-token')).toMatch(/^H 1 /);
    const token = tokenOf(await kept.ask('A held 0 60'));
    expect(await kept.ask('A second 0 60')).toBe('B second');
    writeFileSync(file, 'memory: true\nclient-tokens: [new-token]\nmax-locks: 5\n');
    s.proc.kill('SIGHUP');
    await new Promise((r) => setTimeout(r, 300));
    expect(s.stderr()).toMatch(/configuration reloaded/);
    const refused = await Wire.open(s.port);
    expect(await refused.ask('H 1 old-token')).toMatch(/^E auth /);
    const fresh = await Wire.open(s.port);
    expect(await fresh.ask('H 1 new-token')).toMatch(/^H 1 /);
    expect(await fresh.ask('A second 0 60')).toMatch(/^A /);
    // The connection made before the reload still works, and its lock is still held.
    expect(await kept.ask('P')).toBe('P');
    expect(await kept.ask(`R held ${token}`)).toBe('R held');
    // A bad file on reload is logged and the running configuration kept.
    writeFileSync(file, 'max-locks: nope\n');
    s.proc.kill('SIGHUP');
    await new Promise((r) => setTimeout(r, 300));
    expect(s.stderr()).toMatch(/reload failed; keeping the running configuration/);
    const still = await Wire.open(s.port);
    expect(await still.ask('H 1 new-token')).toMatch(/^H 1 /);
    await s.stop();
  });
});

describe('start-up errors', () => {
  const cases: Array<[string[], RegExp]> = [
    [['--max-locks', 'abc'], /^ticketing server: invalid --max-locks: "abc" must be an integer from 1 to 100000000$/],
    [['--max-locks', '0'], /invalid --max-locks: "0" must be an integer from 1/],
    [['--listen', 'nowhere'], /invalid --listen: "nowhere" must be HOST:PORT/],
    [['--listen', '127.0.0.1:70000'], /invalid --listen: "127.0.0.1:70000"/],
    [['--mode', 'paxos'], /invalid --mode: "paxos" must be priority or raft/],
    [['--log-level', 'loud'], /invalid --log-level: "loud"/],
    [['--peers', 'a=1.2.3.4:1,b=nope', '--node', 'a'], /invalid --peers/],
    [['--peers', 'a=127.0.0.1:1,b=127.0.0.1:2', '--node', 'c'], /"c" is not one of the peers \(a, b\)/],
    [['--tls-cert', 'x.pem'], /tls-cert and tls-key must be given together/],
    // Issue 14, finding 1: a cluster whose peer links nobody authenticates does not start.
    [['--peers', 'a=127.0.0.1:1,b=127.0.0.1:2', '--node', 'a'], /^ticketing server: invalid peers: a cluster needs peer-token .* --insecure-peers/],
    [['--bogus'], /unknown option '--bogus'/],
  ];
  for (const [args, pattern] of cases) {
    it(`exits non-zero with one clear line for ${args.join(' ')}`, async () => {
      const r = await runCli(['server', '--memory', ...args]);
      expect(r.code).not.toBe(0);
      if (args[0] !== '--bogus') expect(r.code).toBe(2);
      const first = r.stderr.trim().split('\n')[0]!;
      expect(first).toMatch(pattern);
      expect(r.stdout).toBe('');
    });
  }

  it('reads a YAML config file, lets flags override it, and names the file in errors', async () => {
    const dir = tempDir();
    const file = join(dir, 'ticketing.yaml');
    writeFileSync(file, 'memory: true\nmax-locks: 1\nnode: from-file\nclient-tokens: [a, b]\n');
    const s = await startServer(['--config', file, '--node', 'from-flag'], { memory: false });
    expect(s.readyLine).toMatch(/node=from-flag/);
    const w = await Wire.open(s.port);
    expect(await w.ask('H 1 b')).toBe('H 1 from-flag');
    expect(await w.ask('A one 0 5')).toMatch(/^A /);
    expect(await w.ask('A two 0 5')).toBe('B two'); // max-locks from the file
    await s.stop();
    writeFileSync(file, 'max-locks: lots\n');
    const r = await runCli(['server', '--config', file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(new RegExp(`invalid max-locks in ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: "lots" must be an integer`));
    writeFileSync(file, 'max-lock: 5\n');
    expect((await runCli(['server', '--config', file])).stderr).toMatch(/unknown key "max-lock"/);
    writeFileSync(file, 'a: [\n');
    expect((await runCli(['server', '--config', file])).stderr).toMatch(/is not valid YAML/);
  });

  it('reports a port already in use in one line', async () => {
    const s = await startServer();
    const r = await runCli(['server', '--memory', '--listen', s.address]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/EADDRINUSE/);
    await s.stop();
  });
});
