/**
 * Raft mode under faults, checked for linearizability: clients record every
 * acquire and release (invocation, completion, outcome; lost replies are
 * unknown) while the test kills the leader with SIGKILL, pauses it with
 * SIGSTOP, cuts it off with a partition, or restarts a follower. The checker
 * (Wing-Gong/Lowe, per key, leases as time bounds) must find no anomaly.
 */
import { check, formatVerdict, runWorkload, type WorkloadResult } from '@ticketing/checker';
import { afterEach, describe, expect, it } from 'vitest';
import { TestCluster } from '../helpers/cluster.js';

let cluster: TestCluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

// A new leader counts leases from its own apply time, up to an election later (docs/verify.md).
const SLACK_MS = 1_500;
const sleep = async (ms: number) => new Promise((r) => setTimeout(r, ms));

async function raftCluster(proxied = false): Promise<TestCluster> {
  cluster = await TestCluster.create(['a', 'b', 'c'], { dataDirs: true, extraArgs: ['--mode', 'raft'], proxied });
  await cluster.startAll();
  return cluster;
}

async function leaderOf(c: TestCluster): Promise<string> {
  for (;;) {
    for (const n of c.nodes) if (n.server !== undefined && (await c.roleOf(n.name)).role === 'active') return n.name;
    await sleep(20);
  }
}

/** Runs the recording workload against every node while `faults` run, then checks the history. */
async function verifyUnder(c: TestCluster, faults: () => Promise<void>): Promise<WorkloadResult> {
  await leaderOf(c);
  const addresses = c.nodes.map((n) => `127.0.0.1:${n.port}`);
  const run = runWorkload({ addresses, durationMs: 7_000, clients: 6, keys: 3 });
  await faults();
  const result = await run;
  const verdict = check(result.history, { slackMs: SLACK_MS });
  const answered = result.history.filter((o) => o.outcome !== 'unknown').length;
  process.stderr.write(`raft linearizability: ${result.history.length} operations (${answered} answered), ${verdict.ok ? 'linearizable' : 'ANOMALIES'}\n`);
  expect(verdict.anomalies, formatVerdict(verdict)).toEqual([]);
  expect(verdict.ok).toBe(true);
  expect(answered).toBeGreaterThan(50);
  return result;
}

describe('raft linearizability under faults', () => {
  it('kill -9 of the leader', async () => {
    const c = await raftCluster();
    await verifyUnder(c, async () => {
      await sleep(2_000);
      await c.kill(await leaderOf(c));
      await sleep(2_500);
    });
  });

  it('the leader paused with SIGSTOP, then resumed', async () => {
    const c = await raftCluster();
    await verifyUnder(c, async () => {
      await sleep(1_500);
      const leader = c.node(await leaderOf(c)).server!.proc;
      leader.kill('SIGSTOP');
      await sleep(2_500);
      leader.kill('SIGCONT');
    });
  });

  it('the leader cut off by a partition, then healed', async () => {
    const c = await raftCluster(true);
    await verifyUnder(c, async () => {
      await sleep(1_500);
      const leader = await leaderOf(c);
      c.partition([leader], c.nodes.map((n) => n.name).filter((n) => n !== leader));
      await sleep(3_000);
      c.heal();
    });
  });

  it('a follower restarted, then the new leader killed', async () => {
    const c = await raftCluster();
    await verifyUnder(c, async () => {
      await sleep(1_000);
      const leader = await leaderOf(c);
      const follower = c.nodes.map((n) => n.name).find((n) => n !== leader)!;
      await c.kill(follower);
      await sleep(1_000);
      await c.start(follower);
      await sleep(1_000);
      await c.kill(await leaderOf(c));
    });
  });
});
