/**
 * `ticketing verify` against real clusters: a two-node priority cluster is
 * linearizable while nothing fails (the standby's clients follow its
 * redirect), and shows anomalies while a partition leaves two actives
 * (priority mode does not keep mutual exclusion then, as docs/cluster.md
 * says); a three-node Raft cluster is linearizable. (Raft under faults is
 * tested in test/raft/.)
 */
import { afterEach, describe, expect, it } from 'vitest';
import { runCli, TestCluster } from '@ticketing/test-support';

let cluster: TestCluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

const addresses = (c: TestCluster) => c.nodes.map((n) => `127.0.0.1:${n.port}`).join(',');

describe('ticketing verify against real clusters', () => {
  it('finds a healthy two-node cluster linearizable', async () => {
    cluster = await TestCluster.create(['a', 'b']);
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    // Half the clients start on the standby and must follow its M to the active node.
    const r = await runCli(['verify', '--addr', addresses(cluster), '--duration', '3'], 30_000);
    expect(r.stdout).toMatch(/^ {2}acquire +\d+ +granted [1-9]\d*, timeout \d+, busy 0, unknown 0$/m);
    expect(r.stdout).toMatch(/^verdict: linearizable$/m);
    expect(r.code).toBe(0);
  });

  it('finds a healthy three-node Raft cluster linearizable', async () => {
    cluster = await TestCluster.create(['a', 'b', 'c'], { dataDirs: true, extraArgs: ['--mode', 'raft'] });
    await cluster.startAll();
    const c = cluster;
    const t0 = performance.now();
    while ((await Promise.all(c.nodes.map(async (n) => (await c.roleOf(n.name)).role))).every((role) => role !== 'active')) {
      expect(performance.now() - t0).toBeLessThan(10_000);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const r = await runCli(['verify', '--addr', addresses(cluster), '--duration', '3'], 30_000);
    expect(r.stdout).toMatch(/^ {2}acquire +\d+ +granted [1-9]\d*, timeout \d+, busy 0, unknown 0$/m);
    expect(r.stdout).toMatch(/^verdict: linearizable$/m);
    expect(r.code).toBe(0);
  });

  it('finds the anomaly while a partition leaves two actives granting the same keys', async () => {
    cluster = await TestCluster.create(['a', 'b'], { proxied: true });
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    cluster.partition(['a'], ['b']);
    await cluster.waitForActives(['a', 'b']);
    const r = await runCli(['verify', '--addr', addresses(cluster), '--duration', '3', '--keys', '2'], 30_000);
    // Each active grants on its own: the keys' tokens interleave in ways no single lock allows.
    expect(r.stdout).toMatch(/^ {2}1\. [a-z-]+ on key ticketing-verify\/[0-9a-f]{8}\/[01]: /m);
    expect(r.stdout).toMatch(/^verdict: NOT linearizable \(\d+ anomal(y|ies)\)$/m);
    expect(r.code).toBe(1);
  });
});
