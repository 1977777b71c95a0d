/**
 * Issue 26's defects of the priority cluster, each against real processes
 * (the links through the shared fault proxy where a link must break): an
 * added or mistyped member, a fast crash-restart and a pause of the active
 * under --sync-standbys, skewed clocks, a data directory moved to Raft mode,
 * a peer-token rotation, a stale mismatch mark, a sync-standbys setting that
 * stalls, and a hand-back under steady load.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { freePortPairs, runCli, sleep, startServer, TestCluster, tokenOf, Wire, type NodeHandle } from '@ticketing/test-support';

let cluster: TestCluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

async function ask(port: number, text: string, ms = 2_000): Promise<string> {
  const w = await Wire.open(port);
  try {
    return await w.ask(text, ms);
  } finally {
    w.destroy();
  }
}

/** Grants `count` keys `prefix0..` on the node at `port`, pipelined; returns their tokens. */
async function grantMany(port: number, prefix: string, count: number, lease = 120): Promise<bigint[]> {
  const w = await Wire.open(port);
  w.send(Array.from({ length: count }, (_, i) => `A ${prefix}${i} 0 ${lease}\n`).join(''));
  const lines = await w.lineCount(count, 10_000);
  w.destroy();
  return lines.map(tokenOf);
}

/** Which of `keys` are held on the node at `port` (an immediate acquire answers T). */
async function held(port: number, keys: string[]): Promise<string[]> {
  const w = await Wire.open(port);
  w.send(keys.map((k) => `A ${k} 0 1\n`).join(''));
  const lines = await w.lineCount(keys.length, 10_000);
  w.destroy();
  return lines.filter((l) => l.startsWith('T ')).map((l) => l.slice(2));
}

/** `held` on whichever node serves, again if a hand-off closes the connection meanwhile. */
async function heldOnActive(c: TestCluster, keys: string[]): Promise<string[]> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await held(await activePort(c), keys);
    } catch (err) {
      if (attempt >= 5) throw err;
      await sleep(100);
    }
  }
}

/** Fails if `name` answers as the active at any poll within `ms`. */
async function neverActive(c: TestCluster, name: string, ms: number): Promise<void> {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    expect((await c.roleOf(name)).role, `${name} became active`).not.toBe('active');
    await sleep(100);
  }
}

/** The node at `port` that serves, after following redirects: its port. */
async function activePort(c: TestCluster, ms = 10_000): Promise<number> {
  const until = performance.now() + ms;
  for (;;) {
    for (const n of c.nodes) {
      if (n.server !== undefined && (await c.roleOf(n.name)).role === 'active') return n.port;
    }
    if (performance.now() > until) throw new Error('no active node');
    await sleep(50);
  }
}

function peersOf(nodes: NodeHandle[]): string {
  return nodes.map((n) => `${n.name}=127.0.0.1:${n.port}`).join(',');
}

interface StatusPeer {
  name: string;
  link?: string;
  refusing?: string;
  clockOffsetMs?: number;
  clockBeyondBound?: boolean;
}

async function statusOf(c: TestCluster, name: string): Promise<{ role: string; peers: StatusPeer[]; priority?: { role: string; notPromotingBecause?: string }; replication?: { stalled: boolean } }> {
  return (await c.status(name)) as never;
}

describe('issue 26: the priority cluster keeps its promises through operators, pauses and clocks', () => {
  it('defect 1: a member added on one node only is refused and never serves beside the active (in any position of its list)', async () => {
    cluster = await TestCluster.create(['a', 'b', 'c'], { extraArgs: ['--http', '127.0.0.1:0'] });
    const [a, b, c] = cluster.nodes as [NodeHandle, NodeHandle, NodeHandle];
    await cluster.start('a', [], peersOf([a, b]));
    await cluster.start('b', [], peersOf([a, b]));
    await cluster.waitForActives(['a'], 10_000).catch(() => undefined);
    expect((await cluster.roleOf('a')).role).toBe('active');
    // c believes the cluster is a, b, c; then, restarted, that it is c, a, b (it would share a's token residue).
    for (const list of [peersOf([a, b, c]), peersOf([c, a, b])]) {
      await cluster.start('c', [], list);
      // Longer than the ten failover timeouts after which discovery used to give up.
      await neverActive(cluster, 'c', 6_000);
      expect(c.server!.stderr()).toMatch(/refuses our link/);
      const status = await statusOf(cluster, 'c');
      expect(status.peers.find((p) => p.name === 'a')).toMatchObject({ link: 'refusing' });
      expect(status.priority?.notPromotingBecause).toMatch(/refuses our link/);
      await cluster.kill('c');
    }
    expect((await cluster.roleOf('a')).role).toBe('active');
  });

  it('defect 1: a node restarted with another peers list while its peers are down does not serve alone; with the same list again it does', async () => {
    cluster = await TestCluster.create(['a', 'b', 'c'], { dataDirs: true, extraArgs: ['--http', '127.0.0.1:0'] });
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    const [a, b] = cluster.nodes as [NodeHandle, NodeHandle, NodeHandle];
    await cluster.kill('b');
    await cluster.kill('c');
    await cluster.kill('a');
    // c left out of a's list by mistake: a alone would believe it is the whole cluster.
    await cluster.start('a', [], peersOf([a, b]));
    expect(a.server!.stderr()).toMatch(/last served with other peers/);
    await neverActive(cluster, 'a', 2_500);
    expect((await statusOf(cluster, 'a')).priority?.notPromotingBecause).toMatch(/last served with the peers a,b,c/);
    await cluster.kill('a');
    await cluster.start('a');
    await cluster.waitForActives(['a'], 10_000);
  });

  // The links go through the fault proxy, which stays up when a dies: the standbys see closed links, not a
  // refused port, so the restarted process is back before they decide, whatever the machine's speed.
  for (const timeout of [500, 8_000]) {
    it(`defect 2: a fast crash-restart of the active loses no acknowledged grant with --sync-standbys 1 (failover-timeout ${timeout} ms)`, async () => {
      cluster = await TestCluster.create(['a', 'b', 'c'], { proxied: true, dataDirs: true, extraArgs: ['--sync-standbys', '1', '--failover-timeout', String(timeout)] });
      await cluster.startAll();
      await cluster.waitForActives(['a']);
      const a = cluster.node('a');
      const keys = Array.from({ length: 50 }, (_, i) => `fast${i}`);
      const before = await grantMany(a.port, 'fast', 50);
      // Back before the standbys decided anything.
      await cluster.kill('a');
      await cluster.start('a');
      // Every acknowledged grant is still held wherever the cluster serves, and a later grant is above them.
      expect(await heldOnActive(cluster, keys)).toEqual(keys);
      await cluster.waitForActives(['a'], 30_000);
      expect(await held(a.port, keys)).toEqual(keys);
      const after = await grantMany(a.port, 'after', 1);
      expect(after[0]!).toBeGreaterThan(before.reduce((m, t) => (t > m ? t : m)));
    });
  }

  it('defect 3: an active paused (SIGSTOP) and resumed steps back to its successor, whose acknowledged grants survive, and grants no smaller token', async () => {
    cluster = await TestCluster.create(['a', 'b', 'c'], { extraArgs: ['--sync-standbys', '1'] });
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    const a = cluster.node('a');
    const b = cluster.node('b');
    await grantMany(a.port, 'early', 5);
    a.server!.proc.kill('SIGSTOP');
    await cluster.waitForActives(['b'], 10_000).catch(() => undefined);
    const port = await activePort(cluster);
    expect(port).not.toBe(a.port);
    const keys = Array.from({ length: 20 }, (_, i) => `paused${i}`);
    const onSuccessor = await grantMany(port, 'paused', 20);
    a.server!.proc.kill('SIGCONT');
    // A client of a (its connection open across the pause) asks at once.
    const late = await ask(a.port, 'A late 0 30', 3_000).catch(() => 'closed');
    if (late.startsWith('A ')) expect(tokenOf(late)).toBeGreaterThan(onSuccessor.reduce((m, t) => (t > m ? t : m)));
    await sleep(1_500);
    expect(await heldOnActive(cluster, keys)).toEqual(keys);
    expect(a.server!.stderr()).toMatch(/paused or starved/);
    void b;
  });

  it('defect 4: heartbeats carry time: each node measures its peers\' clocks, exports them, and a node 10 s off refuses to take over', async () => {
    const offsets: Record<string, number> = { b: 10 };
    cluster = await TestCluster.create(['a', 'b'], { clockOffsets: offsets, extraArgs: ['--http', '127.0.0.1:0'] });
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    // b is 10 s ahead: both see it, say so, and export it.
    await sleep(1_000);
    const sa = await statusOf(cluster, 'a');
    const peer = sa.peers.find((p) => p.name === 'b')!;
    expect(peer.clockOffsetMs).toBeGreaterThan(9_800);
    expect(peer.clockOffsetMs).toBeLessThan(10_200);
    expect(peer.clockBeyondBound).toBe(true);
    const metrics = await (await fetch(`http://${cluster.node('a').server!.http}/metrics`)).text();
    expect(metrics).toMatch(/^ticketing_peer_clock_offset_seconds\{peer="b"\} (9\.9|10\.0)\d*$/m);
    expect(metrics).toMatch(/^ticketing_peer_clock_beyond_bound\{peer="b"\} 1$/m);
    expect(cluster.node('a').server!.stderr()).toMatch(/beyond the bound/);
    expect(cluster.node('b').server!.stderr()).toMatch(/beyond the bound/);
    // The active keeps serving (its tokens are what b inherits), but b will not take over from a clock
    // 10 s away: its tokens could not be ordered against a's last ones.
    const [before] = await grantMany(cluster.node('a').port, 'clock', 1);
    await cluster.kill('a');
    await neverActive(cluster, 'b', 3_000);
    expect((await statusOf(cluster, 'b')).priority?.notPromotingBecause).toMatch(/clock of a was -\d+ ms from ours when last heard, beyond/);
    // a comes back: still no node serves while their clocks disagree (refusing, not guessing).
    await cluster.start('a');
    await neverActive(cluster, 'a', 1_500);
    // The operator fixes b's clock: the cluster serves again, and tokens still grow.
    delete offsets.b;
    await cluster.kill('b');
    await cluster.start('b');
    await cluster.waitForActives(['a'], 10_000);
    const [after] = await grantMany(cluster.node('a').port, 'clock-after', 1);
    expect(after!).toBeGreaterThan(before!);
  });

  it('defect 4: a correct node whose tokens a fast peer dragged ahead still starts, and follows', async () => {
    cluster = await TestCluster.create(['a', 'b'], { dataDirs: true, clockOffsets: { a: 10 } });
    // a alone first (10 s ahead), so its tokens run ahead of b's clock; then b joins and replicates them.
    await cluster.start('a');
    await cluster.waitForActives(['a'], 8_000).catch(() => undefined);
    await cluster.start('b');
    const a = cluster.node('a');
    const dragged = await grantMany(a.port, 'drag', 5);
    await sleep(500);
    // b restarts: its data directory holds tokens 10 s ahead of its (correct) clock. It used to refuse to start.
    await cluster.kill('b');
    await cluster.start('b');
    await sleep(1_000);
    expect((await cluster.roleOf('b')).role).toBe('standby');
    expect(dragged.length).toBe(5);
  });

  it('defect 5: a data directory moved from priority mode to Raft mode keeps its tokens growing', async () => {
    cluster = await TestCluster.create(['a', 'b'], { dataDirs: true });
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    const a = cluster.node('a');
    const [priorityToken] = await grantMany(a.port, 'moved', 1);
    await cluster.kill('a');
    await cluster.kill('b');
    const raft = await startServer(['--mode', 'raft', '--node', 'a', '--peers', `a=127.0.0.1:${a.port}`, '--listen', `127.0.0.1:${a.port}`, '--data-dir', cluster.dataDir('a')], { memory: false });
    try {
      let reply = '';
      const until = performance.now() + 10_000;
      while (!reply.startsWith('A ') && performance.now() < until) {
        reply = await ask(raft.port, 'A moved-raft 0 30').catch(() => '');
        if (!reply.startsWith('A ')) await sleep(100);
      }
      expect(tokenOf(reply)).toBeGreaterThan(priorityToken!);
      expect(raft.stderr()).toMatch(/issued in priority mode: tokens go on above them/);
    } finally {
      await raft.stop('SIGKILL');
    }
  });

  it('defect 6: a standby restarted with another peer token never becomes a second active', async () => {
    cluster = await TestCluster.create(['a', 'b'], { extraArgs: ['--http', '127.0.0.1:0'] });
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    await cluster.kill('b');
    // The rotation step done on one node only (or a typo at first deployment).
    await cluster.start('b', ['--peer-token', 'the-next-peer-token-not-yet-on-a']);
    await neverActive(cluster, 'b', 6_000);
    expect((await statusOf(cluster, 'b')).peers[0]).toMatchObject({ name: 'a', link: 'refusing' });
    // Said in ticketing status and in the metrics too.
    const status = await runCli(['status', '--addr', cluster.node('b').server!.http!]);
    expect(status.stdout).toMatch(/WARNING b: a is running but refuses its link .*no node promotes past it/);
    const metrics = await (await fetch(`http://${cluster.node('b').server!.http}/metrics`)).text();
    expect(metrics).toMatch(/^ticketing_peer_refusing\{peer="a"\} 1$/m);
    expect((await cluster.roleOf('a')).role).toBe('active');
    // Once a is gone (its port refuses b), b may serve: nothing else can.
    await cluster.kill('a');
    await cluster.waitForActives(['b'], 10_000);
  });

  it('defect 7: a peer that once ran with the wrong order and is gone does not block failover', async () => {
    cluster = await TestCluster.create(['a', 'b', 'c']);
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    const [a, b, c] = cluster.nodes as [NodeHandle, NodeHandle, NodeHandle];
    await cluster.kill('c');
    await cluster.start('c', [], peersOf([a, c, b]));
    await sleep(1_500);
    await cluster.kill('c');
    await cluster.kill('a');
    // b takes over: c is gone (its port refuses), a is gone.
    const until = performance.now() + 8_000;
    while ((await cluster.roleOf('b')).role !== 'active') {
      if (performance.now() > until) throw new Error(`b never took over; it redirects to ${(await cluster.roleOf('b')).redirect}`);
      await sleep(100);
    }
  });

  it('defect 8: --sync-standbys equal to the number of standbys is refused at start, and with --sync-standbys-allow-stall a stall says so and answers T', async () => {
    const [p1, p2] = await freePortPairs(2);
    const peers = `a=127.0.0.1:${p1},b=127.0.0.1:${p2}`;
    const refused = await runCli(['server', '--node', 'a', '--peers', peers, '--listen', `127.0.0.1:${p1}`, '--memory', '--insecure-peers', '--sync-standbys', '1']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/a single failure would stop the cluster/);
    cluster = await TestCluster.create(['a', 'b'], { extraArgs: ['--sync-standbys', '1', '--sync-standbys-allow-stall', '--http', '127.0.0.1:0'] });
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    const a = cluster.node('a');
    expect(a.server!.stderr()).toMatch(/one standby failure stops every reply/);
    await cluster.kill('b');
    await sleep(800);
    const ready = await fetch(`http://${a.server!.http}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.text()).toMatch(/replies-stalled/);
    // A grant the stall holds is answered T when its wait runs out, never A after its lease.
    const t0 = performance.now();
    const reply = await ask(a.port, 'A stalled 2 5', 5_000);
    const took = performance.now() - t0;
    expect(reply).toBe('T stalled');
    expect(took).toBeGreaterThan(1_800);
    expect(took).toBeLessThan(3_000);
  });

  it('defect 10: under steady load the active hands back to a returning higher-priority node within two failover timeouts', async () => {
    cluster = await TestCluster.create(['a', 'b']);
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    await cluster.kill('a');
    await cluster.waitForActives(['b']);
    const b = cluster.node('b');
    // One pipelined worker that never stops: acquire and release, 32 in flight.
    const w = await Wire.open(b.port);
    let running = true;
    let i = 0;
    const pump = (async () => {
      while (running) {
        w.send(Array.from({ length: 32 }, () => `A load${i++} 0 1\n`).join(""));
        await sleep(2);
      }
    })();
    await sleep(300);
    const started = await cluster.start('a');
    const a = cluster.node('a');
    const t0 = performance.now();
    while ((await cluster.roleOf('a')).role !== 'active') {
      if (performance.now() - t0 > 5_000) throw new Error('no hand-back within 5 s');
      await sleep(20);
    }
    const took = performance.now() - t0;
    running = false;
    await pump;
    w.destroy();
    expect(started.readyLine).toMatch(/role=standby/);
    // It used to wait for an instant with nothing unacknowledged: 13 s or more under one pipelined worker.
    // The figure (two failover timeouts, from the node's start) is measured by npm run bench on a quiet
    // machine; here, on a loaded one, it must at least be seconds, not never.
    expect(took, a.server!.stderr()).toBeLessThan(5_000);
    expect(a.server!.stderr()).toMatch(/hand-off from b/);
  });
});
