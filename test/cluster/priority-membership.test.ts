/**
 * Membership changes of a priority cluster, done the way docs/cluster.md
 * says (Changing the members): add a node, remove one, with real processes
 * and data directories. Throughout, at most one node serves, and tokens only
 * grow; held locks are dropped at the cut-over (as in a whole-cluster
 * restart), which the procedure says.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { sleep, TestCluster, tokenOf, Wire, type NodeHandle } from '@ticketing/test-support';

let cluster: TestCluster | undefined;
let watching = false;
afterEach(async () => {
  watching = false;
  await cluster?.stop();
  cluster = undefined;
});

function peersOf(nodes: NodeHandle[]): string {
  return nodes.map((n) => `${n.name}=127.0.0.1:${n.port}`).join(',');
}

async function grantOn(port: number, key: string): Promise<bigint> {
  const w = await Wire.open(port);
  try {
    return tokenOf(await w.ask(`A ${key} 0 30`));
  } finally {
    w.destroy();
  }
}

/**
 * Polls every running node until stopped; resolves with the most nodes that
 * served at once. A node serves throughout [t1, t2] when it answered two
 * pings in a row as the active node (no redirect), at t1 and t2; two serve at
 * once only when such spans overlap. A single answer each would not tell:
 * under load a node holding its clients (while it decides, or takes over in
 * a hand-back) answers late, after the other stopped serving (CI, 2026-12-07:
 * a hand-back from b to a counted as two actives).
 */
async function watchActives(c: TestCluster): Promise<number> {
  watching = true;
  const servingSpan = async (name: string): Promise<[number, number] | undefined> => {
    if ((await c.roleOf(name)).role !== 'active') return undefined;
    const t1 = performance.now();
    if ((await c.roleOf(name)).role !== 'active') return undefined;
    return [t1, performance.now()];
  };
  return (async () => {
    let most = 0;
    while (watching) {
      const spans = (await Promise.all(c.nodes.filter((n) => n.server !== undefined).map(async (n) => servingSpan(n.name)))).filter((x) => x !== undefined);
      const atOnce = Math.max(0, ...spans.map(([from, to]) => spans.filter(([a, b]) => a <= to && b >= from).length));
      most = Math.max(most, atOnce);
      await sleep(50);
    }
    return most;
  })();
}

/** The port of the one node that serves, within `ms`. */
async function servingPort(c: TestCluster, ms = 15_000): Promise<number> {
  const until = performance.now() + ms;
  for (;;) {
    for (const n of c.nodes) if (n.server !== undefined && (await c.roleOf(n.name)).role === 'active') return n.port;
    if (performance.now() > until) throw new Error('no node serves');
    await sleep(50);
  }
}

describe('priority cluster: changing the members (docs/cluster.md)', () => {
  it('adds a node: new list on the new node, then on each standby, then the active stops and starts with it; one active throughout', async () => {
    cluster = await TestCluster.create(['a', 'b', 'c'], { dataDirs: true });
    const [a, b, c] = cluster.nodes as [NodeHandle, NodeHandle, NodeHandle];
    const old = peersOf([a, b]);
    await cluster.start('a', [], old);
    await cluster.start('b', [], old);
    const before = await grantOn(await servingPort(cluster), 'before');
    const most = watchActives(cluster);
    // 1. The new node, with the new list: the others refuse it, so it stays out.
    await cluster.start('c');
    await sleep(1_500);
    expect((await cluster.roleOf('c')).role).not.toBe('active');
    // 2. Each standby, restarted with the new list: the active refuses it, so it stays out too.
    await cluster.kill('b', 'SIGTERM');
    await cluster.start('b');
    await sleep(1_500);
    expect((await cluster.roleOf('a')).role).toBe('active');
    // 3. The active last: stopped (no standby shares its list: no hand-off, its locks go), started with the new list.
    await cluster.kill('a', 'SIGTERM');
    await cluster.start('a');
    // Once all three answer each other with the new list, one promotes; priority brings a back.
    await cluster.waitForActives(['a'], 15_000);
    expect(await grantOn(a.port, 'after')).toBeGreaterThan(before);
    watching = false;
    expect(await most).toBe(1);
    void c;
  });

  it('removes a node: it stops first, then each standby and last the active restart with the list without it', async () => {
    cluster = await TestCluster.create(['a', 'b', 'c'], { dataDirs: true });
    await cluster.startAll();
    const [a, b] = cluster.nodes as [NodeHandle, NodeHandle, NodeHandle];
    const before = await grantOn(await servingPort(cluster), 'before');
    const most = watchActives(cluster);
    await cluster.kill('c', 'SIGTERM');
    await cluster.kill('b', 'SIGTERM');
    await cluster.start('b', [], peersOf([a, b]));
    await sleep(1_000);
    expect((await cluster.roleOf('b')).role).not.toBe('active');
    await cluster.kill('a', 'SIGTERM');
    await cluster.start('a', [], peersOf([a, b]));
    await cluster.waitForActives(['a'], 15_000);
    expect(await grantOn(a.port, 'after')).toBeGreaterThan(before);
    watching = false;
    expect(await most).toBe(1);
  });
});
