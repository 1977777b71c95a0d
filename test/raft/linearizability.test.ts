/**
 * Raft mode under faults, checked for linearizability: clients record every
 * acquire and release (invocation, completion, outcome; lost replies are
 * unknown) while the test kills the leader with SIGKILL, pauses it with
 * SIGSTOP, cuts it off with a partition, restarts a follower, or runs the
 * followers on skewed clocks. The checker (Wing-Gong/Lowe, per key, leases as
 * time bounds) must find no anomaly.
 */
import { check, formatVerdict, runWorkload, type WorkloadResult } from '@ticketing/checker';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli, TestCluster } from '@ticketing/test-support';

let cluster: TestCluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

// A new leader counts leases from its own apply time, up to an election later (docs/verify.md).
const SLACK_MS = 1_500;
const ADMIN_TOKEN = 'linearizability-test-admin-token';
const sleep = async (ms: number) => new Promise((r) => setTimeout(r, ms));

async function raftCluster(proxied = false): Promise<TestCluster> {
  cluster = await TestCluster.create(['a', 'b', 'c'], { dataDirs: true, extraArgs: ['--mode', 'raft'], proxied });
  await cluster.startAll();
  return cluster;
}

async function leaderOf(c: TestCluster, ms = 15_000): Promise<string> {
  const until = performance.now() + ms;
  for (;;) {
    for (const n of c.nodes) if (n.server !== undefined && (await c.roleOf(n.name)).role === 'active') return n.name;
    if (performance.now() > until) throw new Error(`no leader within ${ms} ms`);
    await sleep(20);
  }
}

/**
 * Runs the recording workload against every node while `faults` run, and on until 2.5 s after a
 * leader serves again; then checks the history, and that the workload was served before the
 * faults (each waits a second first) and again after them (the cluster recovered, for its clients).
 */
async function verifyUnder(c: TestCluster, faults: () => Promise<void>): Promise<WorkloadResult> {
  await leaderOf(c);
  const addresses = c.nodes.map((n) => `127.0.0.1:${n.port}`);
  const stop = new AbortController();
  const t0 = performance.now();
  const run = runWorkload({ addresses, durationMs: 60_000, clients: 6, keys: 3, signal: stop.signal });
  await faults();
  await leaderOf(c);
  const recoveredAt = performance.now();
  await sleep(2_500);
  stop.abort();
  const result = await run;
  const verdict = check(result.history, { slackMs: SLACK_MS });
  const answered = result.history.filter((o) => o.outcome !== 'unknown').length;
  const grants = result.history.filter((o) => o.op === 'acquire' && o.outcome === 'granted');
  const summary = `${result.history.length} operations (${answered} answered), workload seed ${result.seed}`;
  process.stderr.write(`raft linearizability: ${summary}, ${verdict.ok ? 'linearizable' : 'ANOMALIES'}\n`);
  expect(verdict.anomalies, formatVerdict(verdict)).toEqual([]);
  expect(verdict.ok).toBe(true);
  expect(grants.filter((o) => o.completedAt! < t0 + 1_000).length, `grants before the faults (${summary})`).toBeGreaterThan(0);
  expect(grants.filter((o) => o.invokedAt > recoveredAt).length, `grants after the cluster recovered (${summary})`).toBeGreaterThan(0);
  return result;
}

// Each runs a workload through its faults and 2.5 s past its recovery (the skewed-clock one then a 12 s lease check).
describe('raft linearizability under faults', { timeout: 60_000 }, () => {
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

  it('followers whose clocks run 2x fast and 0.5x slow: only the leader\'s clock ends leases (libfaketime)', async () => {
    const c = (cluster = await TestCluster.create(['a', 'b', 'c'], {
      dataDirs: true,
      extraArgs: ['--mode', 'raft', '--http', '127.0.0.1:0', '--http-token', ADMIN_TOKEN],
      httpToken: ADMIN_TOKEN,
      clockRates: { b: 2, c: 0.5 },
    }));
    // a (real time) times out before the slow c, so a leads a cluster of a and c; the fast b then joins the
    // settled cluster (a new cluster is founded only by all of its --peers: b is added as a member).
    const ac = ['a', 'c'].map((n) => `${n}=127.0.0.1:${c.node(n).port}`).join(',');
    await c.start('a', [], ac);
    await c.start('c', [], ac);
    expect(await leaderOf(c)).toBe('a');
    const admin = ['--http', c.node('a').server!.http!, '--http-token', ADMIN_TOKEN];
    expect((await runCli(['member', 'add', `b=127.0.0.1:${c.node('b').port}`, ...admin])).code).toBe(0);
    await c.start('b');
    expect((await runCli(['member', 'promote', 'b', ...admin], 20_000)).code).toBe(0);
    // (a and c now name fewer members in --peers than they hold: they would not stand for election, and need not.)
    // The skew is real: over one second of real time, b's clock moves 2 s and c's half a second.
    const rates = await c.clockRates();
    expect(Math.abs(rates.a! - 1)).toBeLessThan(0.15);
    expect(Math.abs(rates.b! - 2)).toBeLessThan(0.3);
    expect(Math.abs(rates.c! - 0.5)).toBeLessThan(0.075);
    await verifyUnder(c, async () => {
      await sleep(2_000);
      await c.kill('b');
      await sleep(500);
      await c.start('b'); // catches up on its fast clock
      await sleep(2_000);
    });
    expect(await leaderOf(c)).toBe('a');

    // The lock tables agree whatever each node's clock says: only the leader's clock ends a lease. Locks
    // with an 8 s lease are still on every node 6 s on (the fast follower's clock says 12 s), and gone from
    // every node soon after the leader's 8 s, long before the slow one's clock says 8 s (16 s).
    await c.waitForHeld((held) => held === 0); // the workload's leases (1-3 s) have run out
    await c.expectLeasesFollowTheLeader(c.node('a').port, { fastRate: 2, slowRate: 0.5 });
  });
});
