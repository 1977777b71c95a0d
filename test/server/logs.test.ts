/**
 * The server's log on stderr, black-box: level names and ISO times in JSON
 * (the default off a terminal) and text, syslog priorities for the journal,
 * log-level reloaded on SIGHUP, and role changes naming whom a node follows.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BIN, startServer, TestCluster, tempDir, type RunningServer } from '@ticketing/test-support';

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const running: RunningServer[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map(async (s) => s.stop()));
});

function jsonLines(stderr: string): Array<Record<string, unknown>> {
  return stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('log lines', () => {
  it('are JSON off a terminal, with the level by name and the time in ISO 8601', async () => {
    const s = await startServer(['--node', 'log-json']);
    running.push(s);
    const started = jsonLines(s.stderr()).find((l) => l.msg === 'started');
    expect(started).toMatchObject({ level: 'info', node: 'log-json', mode: 'single' });
    expect(started!.time).toMatch(ISO);
  });

  it('are TIME LEVEL message key=value with --log-format text', async () => {
    const s = await startServer(['--node', 'log-text', '--log-format', 'text']);
    running.push(s);
    const line = s.stderr().split('\n').find((l) => / started /.test(l));
    expect(line).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO {2}started node=log-text mode=single listen=127\.0\.0\.1:\d+ memory=true$/);
  });

  it('start with their syslog priority when stderr is the systemd journal stream', async () => {
    // JOURNAL_STREAM names the device and inode of the stream systemd connected stderr to: here, the test's pipe.
    const script = `export JOURNAL_STREAM=$(stat -L -c %d:%i /proc/self/fd/2); exec "${process.execPath}" "${BIN}" server --memory --listen 127.0.0.1:0 --http off --node log-journal`;
    const proc = spawn('sh', ['-c', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    try {
      await vi.waitFor(() => expect(stderr).toContain('"msg":"started"'), { timeout: 10_000 });
      expect(stderr.split('\n')[0]).toMatch(/^<6>\{"level":"info","time":"[^"]+"/);
    } finally {
      proc.kill('SIGTERM');
      await new Promise((r) => proc.once('exit', r));
    }
  });
});

describe('SIGHUP', () => {
  it('applies a changed log-level', async () => {
    const dir = tempDir();
    const file = join(dir, 'ticketing.yaml');
    writeFileSync(file, 'memory: true\nlisten: 127.0.0.1:0\nhttp: "off"\nlog-level: warn\n');
    const s = await startServer(['--config', file], { listen: false, memory: false });
    running.push(s);
    expect(jsonLines(s.stderr()).some((l) => l.msg === 'started')).toBe(false); // info is below warn
    writeFileSync(file, 'memory: true\nlisten: 127.0.0.1:0\nhttp: "off"\nlog-level: info\n');
    s.proc.kill('SIGHUP');
    await vi.waitFor(() => expect(jsonLines(s.stderr()).find((l) => l.msg === 'log level changed')).toMatchObject({ level: 'info', from: 'warn', to: 'info' }), { timeout: 5_000 });
    expect(s.stderr()).not.toContain('need a restart');
  });
});

describe('role changes in a Raft cluster', () => {
  it('followers log the leader they follow; a leader stopped by SIGTERM does not name itself as the leader', async () => {
    const cluster = await TestCluster.create(['lr1', 'lr2', 'lr3'], { dataDirs: true, extraArgs: ['--mode', 'raft', '--http', 'off'] });
    await Promise.all(cluster.nodes.map(async (n) => cluster.start(n.name)));
    try {
      const leaderOf = (n: { server?: RunningServer }) => jsonLines(n.server!.stderr()).find((l) => l.msg === 'raft: leader: serving clients');
      const leader = await vi.waitFor(() => {
        const found = cluster.nodes.find((n) => leaderOf(n) !== undefined);
        expect(found).toBeDefined();
        return found!;
      }, { timeout: 20_000, interval: 50 });
      for (const n of cluster.nodes.filter((x) => x !== leader)) {
        await vi.waitFor(
          () => expect(jsonLines(n.server!.stderr()).find((l) => l.msg === `raft: following leader ${leader.name}`)).toMatchObject({ level: 'info', leader: leader.name, leaderAddress: `127.0.0.1:${leader.port}` }),
          { timeout: 10_000, interval: 50 },
        );
      }
      const before = leader.server!.stderr().length;
      const server = leader.server!;
      expect(await cluster.kill(leader.name, 'SIGTERM')).toBe(0);
      const after = jsonLines(server.stderr().slice(before));
      expect(after.find((l) => l.msg === 'raft: stopping: no longer serving clients')).toBeDefined();
      expect(after.filter((l) => l.leader === leader.name)).toEqual([]);
    } finally {
      await Promise.all(cluster.nodes.map(async (n) => cluster.kill(n.name, 'SIGKILL')));
    }
  }, 60_000);
});
