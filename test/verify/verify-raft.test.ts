/**
 * `ticketing verify`, whose workload extends held locks (and stale ones)
 * besides acquiring and releasing, against a 3-node Raft cluster whose
 * leader is killed twice while it runs (the killed node restarted from its
 * data directory in between): the history, extensions included, must be
 * linearizable.
 */
import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { BIN, TestCluster } from '@ticketing/test-support';

let cluster: TestCluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

const sleep = async (ms: number) => new Promise((r) => setTimeout(r, ms));

async function leaderOf(c: TestCluster): Promise<string> {
  for (;;) {
    for (const n of c.nodes) if (n.server !== undefined && (await c.roleOf(n.name)).role === 'active') return n.name;
    await sleep(20);
  }
}

describe('ticketing verify with extensions on a Raft cluster', () => {
  it('is linearizable under leader kills (SIGKILL), extensions included', async () => {
    cluster = await TestCluster.create(['a', 'b', 'c'], { dataDirs: true, extraArgs: ['--mode', 'raft'] });
    await cluster.startAll();
    const c = cluster;
    await leaderOf(c);
    const addresses = c.nodes.map((n) => `127.0.0.1:${n.port}`).join(',');
    // A new leader counts leases from its own apply time, up to an election later (docs/verify.md): 1.5 s of slack.
    const proc = spawn(process.execPath, [BIN, 'verify', '--addr', addresses, '--duration', '14', '--clients', '6', '--keys', '3', '--slack', '1500'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
    proc.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exit = new Promise<number | null>((resolve) => proc.on('exit', resolve));
    // The faults start once the workload does (after verify's first connection), not while the command starts up.
    for (const deadline = performance.now() + 30_000; !out.startsWith('verify: ') && performance.now() < deadline; ) await sleep(50);
    for (let round = 0; round < 2; round++) {
      await sleep(3_000);
      const leader = await leaderOf(c);
      await c.kill(leader);
      await sleep(1_500);
      await c.start(leader);
    }
    const code = await exit;
    process.stderr.write(`verify on raft with extensions:\n${out}`);
    expect(err).toBe('');
    expect(out).toMatch(/^verdict: linearizable$/m);
    expect(code).toBe(0);
    const extended = /^ {2}extend +(\d+) +extended (\d+), not-extended (\d+), unknown (\d+)$/m.exec(out);
    expect(extended, out).not.toBeNull();
    expect(Number(extended![2])).toBeGreaterThan(5);
  }, 90_000);
});
