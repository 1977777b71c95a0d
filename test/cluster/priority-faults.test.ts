/**
 * Priority cluster faults with real processes, links through the shared TCP
 * proxy (issue 13): restarts of the whole cluster and of a lone node, links
 * that close without a node dying, silent black holes, one-way partitions,
 * a partition during a hand-off, mismatched peers lists. Every test checks
 * that tokens only grow, restarts included.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { eventually, freePortPair, sleep, startServer, tempDir, TestCluster, tokenOf, Wire } from '@ticketing/test-support';

let cluster: TestCluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

/** Every token this test saw, in the order it saw them: each must be above all before it. */
let seen: bigint[] = [];
afterEach(() => {
  seen = [];
});

async function grant(port: number, key: string, lease = 60): Promise<bigint> {
  const w = await Wire.open(port);
  const reply = await w.ask(`A ${key} 0 ${lease}`);
  w.destroy();
  const t = tokenOf(reply);
  seen.push(t);
  return t;
}

/** Grants `key` on whichever of `ports` serves it first (retrying through failovers), within `ms`. */
async function grantSomewhere(ports: number[], key: string, ms = 5_000): Promise<{ port: number; token: bigint }> {
  const until = performance.now() + ms;
  for (;;) {
    for (const port of ports) {
      const reply = await (async () => {
        const w = await Wire.open(port);
        try {
          return await w.ask(`A ${key} 0 30`, 1_500);
        } finally {
          w.destroy();
        }
      })().catch(() => 'down');
      if (reply.startsWith('A ')) {
        const token = tokenOf(reply);
        seen.push(token);
        return { port, token };
      }
    }
    if (performance.now() > until) throw new Error(`no node granted ${key} within ${ms} ms`);
    await sleep(20);
  }
}

function expectIncreasing(): void {
  for (let i = 1; i < seen.length; i++) expect(seen[i]!, `token ${i} of ${seen.join(', ')}`).toBeGreaterThan(seen[i - 1]!);
}

describe('priority cluster faults', () => {
  it('defect 1: a restarted --memory cluster issues larger tokens than before (no repeats)', async () => {
    cluster = await TestCluster.create(['a', 'b']);
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    const a = cluster.node('a');
    await grant(a.port, 'kx1');
    await grant(a.port, 'kx2');
    await cluster.kill('a');
    await cluster.kill('b');
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    await grant(a.port, 'kx1');
    await grant(a.port, 'kx2');
    expectIncreasing();
  });

  it('defect 2: a node restarting alone after its peer served issues larger tokens than the peer did', async () => {
    cluster = await TestCluster.create(['a', 'b']);
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    // A few failovers first, so the cluster's tokens have moved well above where a fresh node's clock starts.
    await grant(cluster.node('a').port, 'first');
    await cluster.kill('a');
    await cluster.waitForActives(['b']);
    await grant(cluster.node('b').port, 'second');
    await cluster.start('a');
    await cluster.waitForActives(['a']);
    await cluster.kill('b');
    // a serves alone, b down: b never sees these.
    for (let i = 0; i < 20; i++) await grant(cluster.node('a').port, `alone${i}`);
    await cluster.kill('a');
    await cluster.start('b');
    await cluster.waitForActives(['b']);
    await grant(cluster.node('b').port, 'after');
    expectIncreasing();
  });

  it('defect 3: links that close while both nodes live do not make the standby promote; it resynchronises', async () => {
    // A failover timeout well above the 1 s windows below: only a link that closes may make b promote, not a slow machine.
    cluster = await TestCluster.create(['a', 'b'], { proxied: true, extraArgs: ['--http', '127.0.0.1:0', '--failover-timeout', '2500'] });
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    const a = cluster.node('a');
    for (let i = 0; i < 10; i++) await grant(a.port, `before${i}`);
    await cluster.waitForHeld((n) => n === 10);
    // A middlebox resets every link between them, then lets new ones through at once.
    for (let round = 0; round < 3; round++) {
      cluster.partition(['a'], ['b'], 'rst');
      cluster.heal();
      const until = performance.now() + 1_000;
      while (performance.now() < until) {
        expect((await cluster.roleOf('b')).role).not.toBe('active');
        await sleep(25);
      }
    }
    // The standby is back in sync (a fresh snapshot) and gets what follows.
    await grant(a.port, 'after');
    await cluster.waitForHeld((n) => n === 11);
    expectIncreasing();
  });

  it('a lagging standby (its stream delayed) stays a standby and catches up; an active whose standby is gone says so', async () => {
    cluster = await TestCluster.create(['a', 'b'], { proxied: true, extraArgs: ['--http', '127.0.0.1:0', '--failover-timeout', '1500'] });
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    const a = cluster.node('a');
    // 300 ms each way: well behind, but heard within the failover timeout (1.5 s: a loaded machine's pauses are not the delay tested).
    cluster.delayBetween(['a'], ['b'], 300);
    const w = await Wire.open(a.port);
    w.send(Array.from({ length: 500 }, (_, i) => `A lag${i} 0 60\n`).join(''));
    for (const line of await w.lineCount(500)) seen.push(tokenOf(line));
    w.destroy();
    const until = performance.now() + 1_500;
    while (performance.now() < until) {
      expect((await cluster.roleOf('b')).role).not.toBe('active');
      await sleep(50);
    }
    await cluster.waitForHeld((n) => n === 500);
    cluster.delayBetween(['a'], ['b'], 0);
    const status = (await cluster.status('a')) as unknown as { replication: { standbysAcking: number; alone: boolean } };
    expect(status.replication).toMatchObject({ standbysAcking: 1, alone: false });
    await cluster.kill('b');
    const replication = async () => ((await cluster!.status('a')) as unknown as { replication: { standbysAcking: number; alone: boolean } }).replication;
    await eventually('a saying it is alone', async () => (await replication()).alone, 5_000);
    expect(await replication()).toMatchObject({ standbysAcking: 0, alone: true });
    const metrics = await (await fetch(`http://${a.server!.http}/metrics`)).text();
    expect(metrics).toMatch(/^ticketing_standbys_acking 0$/m);
    expectIncreasing();
  });

  it('a node whose data directory issued tokens far ahead of its clock starts, but does not promote alone: no peer vouches for the tokens since', async () => {
    const dir = tempDir('ticketing-clock-');
    const port = await freePortPair();
    // A high-water mark one hour ahead of now, in the hybrid clock's units (µs x 256), plus a 2 s reservation.
    const ahead = (BigInt(Date.now() + 3_600_000) * 1000n + 2_000_000n) * 256n;
    writeFileSync(join(dir, 'token-high-water'), `${ahead}\n`);
    const peers = `a=127.0.0.1:${port},b=127.0.0.1:${port + 2}`;
    const s = await startServer(['--listen', `127.0.0.1:${port}`, '--node', 'a', '--peers', peers, '--data-dir', dir, '--insecure-peers']);
    try {
      expect(s.stderr()).toMatch(/the clock is behind the tokens this data directory holds/);
      // Its peer is down: it could not tell a clock that stepped back from tokens a fast peer dragged ahead.
      await sleep(1_500);
      const w = await Wire.open(s.port);
      expect(await w.ask('P')).toBe('M -');
      w.destroy();
      const status = (await (await fetch(`http://${s.http}/status`)).json()) as { priority: { notPromotingBecause: string } };
      expect(status.priority.notPromotingBecause).toMatch(/clock is 3[56]\d{5} ms behind the tokens it knows of/);
    } finally {
      await s.stop('SIGKILL');
    }
  });

  it('a silent black hole: the standby promotes only after the failover timeout; tokens stay unique; the higher-priority node wins after healing', async () => {
    cluster = await TestCluster.create(['a', 'b'], { proxied: true });
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    const a = cluster.node('a');
    const b = cluster.node('b');
    await grant(a.port, 'before');
    const t0 = performance.now();
    cluster.blackHole(['a'], ['b']);
    await cluster.waitForActives(['a', 'b']);
    // Nothing but silence tells b: not before the failover timeout (500 ms).
    expect(performance.now() - t0).toBeGreaterThan(450);
    const onA = await grant(a.port, 'split-a');
    const onB = await grant(b.port, 'split-b');
    expect(onA % 16n).toBe(0n);
    expect(onB % 16n).toBe(1n);
    cluster.heal();
    const healed = performance.now();
    await cluster.waitForActives(['a']);
    const coexisted = performance.now() - healed;
    expect(coexisted).toBeLessThan(3_000);
    const after = await grant(a.port, 'after-heal');
    expect(after).toBeGreaterThan(onB);
  });

  it('defect 4: a one-way partition (b cannot hear a) ends with one active, and a takes over again once healed', async () => {
    cluster = await TestCluster.create(['a', 'b'], { proxied: true });
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    const a = cluster.node('a');
    const b = cluster.node('b');
    await grant(a.port, 'before');
    cluster.blockOneWay('a', 'b');
    // b stops hearing a and promotes; a hears b, sees it cannot hear a, and steps back to it.
    const t0 = performance.now();
    await cluster.waitForActives(['b'], 8_000);
    const settled = performance.now() - t0;
    expect(settled).toBeLessThan(5_000);
    const onB = await grant(b.port, 'one-way');
    // Stays so: one active while the partition lasts.
    await sleep(1_000);
    await cluster.waitForActives(['b'], 0);
    cluster.heal();
    // a catches up and b hands back to it.
    await cluster.waitForActives(['a'], 10_000);
    expect(await grant(a.port, 'healed')).toBeGreaterThan(onB);
    expectIncreasing();
  });

  it('the opposite one-way partition (a cannot hear b): a serves on, b stays a standby', async () => {
    cluster = await TestCluster.create(['a', 'b'], { proxied: true });
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    cluster.blockOneWay('b', 'a');
    await sleep(1_500);
    await cluster.waitForActives(['a'], 0);
    await grant(cluster.node('a').port, 'x');
  });

  it('a standby cut off from the active while a higher-priority standby still hears it holds requests only for a while, then redirects', async () => {
    cluster = await TestCluster.create(['a', 'b', 'c'], { proxied: true });
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    cluster.blackHole(['a'], ['c']);
    // c lost a but b (higher priority) hears it: c must not promote, and after holding its clients for up
    // to two failover timeouts it redirects them to a again.
    await sleep(1_500);
    const t0 = performance.now();
    // (c's peers list reaches a through a proxy: that is the address it redirects to.)
    expect((await cluster.roleOf('c')).redirect).toBe(`127.0.0.1:${cluster.linksBetween('c', 'a')[0].port}`);
    expect(performance.now() - t0).toBeLessThan(500);
    await cluster.waitForActives(['a'], 0);
  });

  it('a partition during a hand-off: the successor takes over after silence, tokens grow', async () => {
    cluster = await TestCluster.create(['a', 'b'], { proxied: true });
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    const a = cluster.node('a');
    const b = cluster.node('b');
    for (let i = 0; i < 5; i++) await grant(a.port, `h${i}`);
    await sleep(200);
    cluster.blackHole(['a'], ['b']);
    const exited = a.server!.exited;
    a.server!.proc.kill('SIGTERM');
    // Its HANDOFF never arrives: it gives up after its hand-off timeout and exits; b promotes on silence.
    expect(await exited).toBe(0);
    a.server = undefined;
    const { port } = await grantSomewhere([b.port], 'after-handoff', 8_000);
    expect(port).toBe(b.port);
    expectIncreasing();
  });

  it('defect 5: nodes started with different peers lists refuse each other, say why on both sides, and never both serve', async () => {
    cluster = await TestCluster.create(['a', 'b']);
    const a = cluster.node('a');
    const b = cluster.node('b');
    const reversed = `b=127.0.0.1:${b.port},a=127.0.0.1:${a.port}`;
    await Promise.all([cluster.start('a'), cluster.start('b', [], reversed)]);
    await eventually('both saying why they refuse each other', () => [a, b].every((n) => /cluster identity mismatch/.test(n.server!.stderr())), 10_000);
    // Each believes it is first in priority order. Neither promotes once it has seen the mismatch; one that
    // came up alone first (its peer not listening yet) may already serve, but never both, at any moment.
    const until = performance.now() + 2_000; // past the failover timeout, several times
    while (performance.now() < until) {
      const roles = await Promise.all([cluster.roleOf('a'), cluster.roleOf('b')]);
      expect(roles.filter((r) => r.role === 'active').length).toBeLessThanOrEqual(1);
      for (const r of roles) if (r.role === 'standby') expect(r.redirect).toBe('-');
      await sleep(50);
    }
    expect(a.server!.stderr()).toMatch(/refused a peer link/);
    expect(a.server!.stderr()).toMatch(/peer refused this node/);
    expect(b.server!.stderr()).toMatch(/peer refused this node/);
  });

  it('defect 5 (raft): nodes started with different members refuse each other, say so, and the odd one never serves', async () => {
    cluster = await TestCluster.create(['a', 'b', 'c'], { dataDirs: true, extraArgs: ['--mode', 'raft'] });
    const [a, b, c] = cluster.nodes as [typeof cluster.nodes[0], typeof cluster.nodes[0], typeof cluster.nodes[0]];
    // c thinks the cluster is a, c only.
    await Promise.all([cluster.start('a'), cluster.start('b'), cluster.start('c', [], `a=127.0.0.1:${a.port},c=127.0.0.1:${c.port}`)]);
    await eventually('a and c saying why they refuse each other', () => [a, c].every((n) => /cluster identity mismatch/.test(n.server!.stderr())), 10_000);
    // a and b are a majority of the real members: they elect a leader and serve. c, refused by a, never can.
    const { port } = await grantSomewhere([a.port, b.port], 'members-mismatch', 10_000);
    expect([a.port, b.port]).toContain(port);
    const until = performance.now() + 2_000; // several election timeouts of c
    while (performance.now() < until) {
      expect((await cluster.roleOf('c')).role).not.toBe('active');
      await sleep(50);
    }
    expect(await Wire.open(c.port).then(async (w) => w.ask('A members-mismatch-c 0 30').finally(() => w.destroy()))).toMatch(/^M /);
    expectIncreasing();
  });

  it('a node with a data directory restarted over and over without granting still starts (its mark does not run ahead of the clock)', async () => {
    cluster = await TestCluster.create(['a', 'b'], { dataDirs: true });
    for (let i = 0; i < 4; i++) {
      await cluster.start('a');
      await cluster.kill('a');
    }
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    await grant(cluster.node('a').port, 'after-restarts');
  });

  it('--sync-standbys 1: every grant acknowledged before a kill -9 of the active is held on the new active', async () => {
    // Three nodes: after the failover b still has a standby (c) to acknowledge, or its replies would wait.
    cluster = await TestCluster.create(['a', 'b', 'c'], { extraArgs: ['--sync-standbys', '1'] });
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    const a = cluster.node('a');
    const b = cluster.node('b');
    // Pipelined, so many grants are in flight when the last reply arrives; it dies at once after it.
    const w = await Wire.open(a.port);
    w.send(Array.from({ length: 300 }, (_, i) => `A sync${i} 0 60\n`).join(''));
    const replies = await w.lineCount(300);
    await cluster.kill('a');
    w.destroy();
    const keys = replies.map((l) => l.split(' ')[2]!);
    await cluster.waitForActives(['b']);
    const check = await Wire.open(b.port);
    check.send(keys.map((k) => `A ${k} 0 1\n`).join(''));
    expect(await check.lineCount(keys.length)).toEqual(keys.map((k) => `T ${k}`));
    check.destroy();
  });

  it('defect 8: a whole-cluster restart with data directories drops held locks, says so in the ready line, and tokens grow', async () => {
    cluster = await TestCluster.create(['a', 'b'], { dataDirs: true });
    await cluster.startAll();
    expect(cluster.node('a').server!.readyLine).toMatch(/ full-restart-keeps-locks=no$/);
    await cluster.waitForActives(['a']);
    const a = cluster.node('a');
    await grant(a.port, 'held');
    await cluster.kill('a');
    await cluster.kill('b');
    await cluster.startAll();
    await cluster.waitForActives(['a']);
    await grant(a.port, 'held'); // free again: as documented
    expectIncreasing();
  });
});
