/**
 * Issue 26's defects of the priority cluster, each against real processes
 * (the links through the shared fault proxy where a link must break): an
 * added or mistyped member, a fast crash-restart and a pause of the active
 * under --sync-standbys, skewed clocks, a data directory moved to Raft mode,
 * a peer-token rotation, a stale mismatch mark, a sync-standbys setting that
 * stalls, and a hand-back under steady load.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { eventually, freePortPairs, runCli, sleep, startServer, tempDir, TestCluster, tokenOf, Wire, type NodeHandle } from '@ticketing/test-support';
import { TicketBroker, type Ticket } from '../../packages/client/src/index.js';

/** Strong peer tokens: one a rotation starts from, and the one it moves to (or a typo's). */
const FIRST_PEER_TOKEN = '3c1f9a7e5b2d8046e1a3c5b7d9f0e2a4c6b8d0f1e3a5c7b9d2f4e6a8c0b1d3e5';
const NEXT_PEER_TOKEN = 'a4e2c0b8d6f41e3a5c7b9d0f2e4a6c8b1d3f5e7a9c0b2d4f6e8a1c3b5d7f9e02';

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
  lag?: number;
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

  // Lease extension (X) rides the stream like a grant and its reply waits for the standby's acknowledgement:
  // an extension acknowledged under --sync-standbys 1 survives the active's death (or its fast restart),
  // so the lock is still held after the lease it was granted with has ended.
  for (const how of ['kill -9', 'fast crash-restart'] as const) {
    it(`extensions: an extension acknowledged with --sync-standbys 1 survives a ${how} of the active`, async () => {
      cluster = await TestCluster.create(['a', 'b', 'c'], { proxied: how === 'fast crash-restart', dataDirs: true, extraArgs: ['--sync-standbys', '1'] });
      await cluster.startAll();
      await cluster.waitForActives(['a']);
      const a = cluster.node('a');
      const keys = Array.from({ length: 40 }, (_, i) => `ext${i}`);
      const grantedAt = performance.now();
      const tokens = await grantMany(a.port, 'ext', keys.length, 2);
      const w = await Wire.open(a.port);
      w.send(keys.map((k, i) => `X ${k} ${tokens[i]} 60\n`).join(''));
      expect(await w.lineCount(keys.length, 10_000)).toEqual(keys.map((k) => `X ${k}`));
      await cluster.kill('a');
      w.destroy();
      if (how === 'fast crash-restart') await cluster.start('a');
      // Past the 2 s the locks were granted with: held only because the extension survived.
      await sleep(Math.max(0, 3_000 - (performance.now() - grantedAt)));
      expect(await heldOnActive(cluster, keys)).toEqual(keys);
      // The holder can still release under its token wherever the cluster serves.
      expect(await ask(await activePort(cluster), `R ${keys[0]} ${tokens[0]}`)).toBe(`R ${keys[0]}`);
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
    // a is active before b's clock joins: no node promotes past a peer's clock it has found beyond the
    // bound (below: a comes back and does not serve), so started together, a became active only if it
    // promoted before it had measured b (CI: it had not, and nobody served).
    await cluster.start('a');
    await cluster.waitForActives(['a']);
    await cluster.start('b');
    await cluster.waitForActives(['a']);
    // b is 10 s ahead: both see it, say so, and export it.
    await sleep(1_000);
    const sa = await statusOf(cluster, 'a');
    const peer = sa.peers.find((p) => p.name === 'b')!;
    expect(peer.clockOffsetMs).toBeGreaterThan(9_800);
    expect(peer.clockOffsetMs).toBeLessThan(10_200);
    expect(peer.clockBeyondBound).toBe(true);
    const metrics = await (await fetch(`http://${cluster.node('a').server!.http}/metrics`)).text();
    // As /status, within half a round trip (a loaded machine's round trips are longer: 9.8-10.2 s).
    const exported = Number(/^ticketing_peer_clock_offset_seconds\{peer="b"\} (\S+)$/m.exec(metrics)?.[1]);
    expect(exported).toBeGreaterThan(9.8);
    expect(exported).toBeLessThan(10.2);
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

  it('a standby whose clock is 5 s fast does not drag the active\'s tokens ahead with it (whole-node simulation, priority seed 406)', async () => {
    // b told a its clock as the highest token it knew of (heartbeats), a issued tokens 5 s ahead, and a
    // correct node that promoted after a died, without having heard them, issued tokens below them.
    cluster = await TestCluster.create(['a', 'b'], { dataDirs: true, clockOffsets: { b: 5 } });
    await cluster.start('a');
    await cluster.waitForActives(['a']);
    await cluster.start('b');
    await cluster.waitForActives(['a']);
    await sleep(1_000); // heartbeats both ways
    const [token] = await grantMany(cluster.node('a').port, 'not-dragged', 1);
    const tokenWallMs = Number(token! / 256_000n);
    expect(tokenWallMs).toBeLessThan(Date.now() + 1_000);
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
    // b followed a and confirmed a grant: a's table is confirmed, so a live peer refusing a's link later does
    // not make a step back (an active alone on a table nobody confirmed does: docs/cluster.md). A follower
    // shows a lag of 0 before it has acknowledged anything; after a grant, 0 means acknowledged.
    await eventually('b follows a', async () => (await statusOf(cluster!, 'a')).peers[0]?.lag !== undefined, 10_000);
    await grantMany(cluster.node('a').port, 'confirmed', 1);
    await eventually('b acknowledged the grant', async () => (await statusOf(cluster!, 'a')).peers[0]?.lag === 0, 10_000);
    // a's role machine takes the confirmation in on its next step: until then a refusing peer would still make it step back.
    await eventually('a knows its table is confirmed', async () => (await cluster!.status('a') as unknown as { replication?: { tableConfirmed: boolean } }).replication?.tableConfirmed === true, 10_000);
    await cluster.kill('b');
    // The rotation step done on one node only (or a typo at first deployment).
    await cluster.start('b', ['--peer-token', NEXT_PEER_TOKEN]);
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

  it('defect 6: the peer token rotates without a gap (peer-token-next on every node, then peer-token node by node, each by SIGHUP)', async () => {
    const dir = tempDir('ticketing-rotation-');
    const files = (name: string) => ({ token: join(dir, `${name}.token`), config: join(dir, `${name}.yaml`) });
    cluster = await TestCluster.create(['a', 'b', 'c'], { extraArgs: ['--http', '127.0.0.1:0'] });
    for (const n of cluster.nodes) {
      writeFileSync(files(n.name).token, FIRST_PEER_TOKEN, { mode: 0o600 });
      writeFileSync(files(n.name).config, '{}\n', { mode: 0o600 });
      await cluster.start(n.name, ['--config', files(n.name).config, '--peer-token-file', files(n.name).token]);
    }
    await cluster.waitForActives(['a']);
    const reload = async (name: string, token: string, next: string | undefined) => {
      writeFileSync(files(name).token, token, { mode: 0o600 });
      writeFileSync(files(name).config, next === undefined ? '{}\n' : `peer-token-next: ${next}\n`, { mode: 0o600 });
      const before = (cluster!.node(name).server!.stderr().match(/configuration reloaded/g) ?? []).length;
      cluster!.node(name).server!.proc.kill('SIGHUP');
      await eventually(`${name} reloaded`, () => (cluster!.node(name).server!.stderr().match(/configuration reloaded/g) ?? []).length > before, 5_000);
    };
    // Step 1: every node also accepts the new token. Step 2: node by node, the new token only.
    for (const n of cluster.nodes) await reload(n.name, FIRST_PEER_TOKEN, NEXT_PEER_TOKEN);
    for (const n of [...cluster.nodes].reverse()) {
      await reload(n.name, NEXT_PEER_TOKEN, undefined);
      // The links up stay up; one node at a time changes, and the active never changes.
      await cluster.waitForActives(['a'], 0);
    }
    // Every link is re-made on the new token alone: restart the standbys; they follow a, nobody refuses anybody.
    for (const name of ['b', 'c']) {
      await cluster.kill(name);
      await cluster.start(name, ['--config', files(name).config, '--peer-token-file', files(name).token]);
    }
    await eventually('b reaches every peer', async () => (await statusOf(cluster!, 'b')).peers.every((p) => p.link === 'reachable'), 10_000);
    // c may still be linking (a standby that follows nobody yet): wait for it, with a still the only active.
    await cluster.waitForActives(['a'], 10_000);
    expect((await cluster.roleOf('a')).role).toBe('active');
    for (const n of cluster.nodes) expect(n.server!.stderr()).not.toMatch(/peer refused this node/);
    // And the standby that follows on the new token takes over when the active dies.
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

  it('defect 9: the TypeScript client gives up on a silent (SIGSTOPped) active within about 2 s and acquires on its successor', async () => {
    cluster = await TestCluster.create(['a', 'b']);
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    const a = cluster.node('a');
    const broker = TicketBroker.connect([`127.0.0.1:${a.port}`, `127.0.0.1:${cluster.node('b').port}`]);
    try {
      await broker.waitReady(5_000);
      const before = await broker.acquire('silent-before', { waitMs: 0, leaseMs: 10_000 });
      await sleep(200);
      const t0 = performance.now();
      a.server!.proc.kill('SIGSTOP');
      // The acquire the silent node swallows: the busy ping (after 750 ms of silence, pong due within 1 s,
      // checked every 100 ms tick) gives up on the connection within about 2 s (it was 10.5 s: a 5 s
      // ping plus a 5 s pong; 2-3 s with a 500 ms tick).
      const swallowed = await broker.acquire('silent-swallowed', { waitMs: 0, leaseMs: 10_000 }).then(
        () => 'granted',
        (err: { code?: string }) => err.code,
      );
      expect(swallowed).toBe('INDETERMINATE');
      expect(performance.now() - t0).toBeLessThan(3_000);
      let ticket: Ticket | undefined;
      for (let i = 0; ticket === undefined; i++) {
        try {
          ticket = await broker.acquire(`silent-${i}`, { waitMs: 0, leaseMs: 10_000 });
        } catch (err) {
          // Until the broker reaches b (its reconnect cycle), there may be no connection.
          expect((err as { code?: string }).code).toMatch(/^(NO_CONNECTION|INDETERMINATE)$/);
          expect(performance.now() - t0).toBeLessThan(8_000);
          await sleep(20);
        }
      }
      // The whole outage: detection plus the broker's way to the successor, about 2 s. (It was 4.8 s: the
      // other connection to the stopped node, idle, was still picked until its own 5 s ping found it
      // dead; now a connection that dies of silence has its siblings to the same server pinged at once,
      // and no request goes to them until they answer.)
      expect(performance.now() - t0).toBeLessThan(4_000);
      expect(ticket.token).toBeGreaterThan(before.token);
    } finally {
      a.server?.proc.kill('SIGCONT');
      await broker.close();
    }
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
    // By the hand-off; on a machine loaded enough to starve b for a failover timeout (CI at load 5),
    // a takes over from a b it judged gone instead, which is the rule too.
    expect(a.server!.stderr()).toMatch(/hand-off from b|the active node is gone/);
  });
});
