/**
 * Raft mode with real processes on loopback: election and redirects,
 * kill -9 of the leader, restarts, a partitioned leader, a paused leader, a
 * whole-cluster restart, and a node replaced with an empty data directory.
 */
import { rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli, TestCluster, tokenOf, Wire } from '@ticketing/test-support';

let cluster: TestCluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

const RAFT = ['--mode', 'raft'];

async function raftCluster(names = ['a', 'b', 'c'], extra: string[] = [], proxied = false): Promise<TestCluster> {
  cluster = await TestCluster.create(names, { dataDirs: true, extraArgs: [...RAFT, ...extra], proxied });
  await cluster.startAll();
  return cluster;
}

async function leaderOf(c: TestCluster, among = c.nodes.map((n) => n.name), timeoutMs = 10_000): Promise<string> {
  const t0 = performance.now();
  for (;;) {
    for (const name of among) if (c.node(name).server !== undefined && (await c.roleOf(name)).role === 'active') return name;
    if (performance.now() - t0 > timeoutMs) throw new Error('no leader');
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function holdMany(port: number, prefix: string, n: number): Promise<Map<string, bigint>> {
  const w = await Wire.open(port);
  const keys = Array.from({ length: n }, (_, i) => `${prefix}${i}`);
  w.send(keys.map((k) => `A ${k} 0 120\n`).join(''));
  const lines = await w.lineCount(n, 10_000);
  w.destroy();
  return new Map(lines.map((l) => [l.split(' ')[2]!, tokenOf(l)]));
}

async function expectHeld(port: number, held: Map<string, bigint>): Promise<void> {
  const w = await Wire.open(port);
  w.send([...held.keys()].map((k) => `A ${k} 0 1\n`).join(''));
  expect(await w.lineCount(held.size, 10_000)).toEqual([...held.keys()].map((k) => `T ${k}`));
  w.destroy();
}

async function grant(port: number, key: string): Promise<bigint> {
  const w = await Wire.open(port);
  const t = tokenOf(await w.ask(`A ${key} 0 60`, 10_000));
  w.destroy();
  return t;
}

const max = (xs: Iterable<bigint>) => [...xs].reduce((a, b) => (a > b ? a : b), 0n);

describe('raft cluster', () => {
  it('elects one leader; followers redirect to it; grants commit', async () => {
    const c = await raftCluster();
    const leader = await leaderOf(c);
    await c.waitForActives([leader]);
    for (const n of c.nodes) {
      if (n.name === leader) continue;
      expect((await c.roleOf(n.name)).redirect).toBe(`127.0.0.1:${c.node(leader).port}`);
    }
    const held = await holdMany(c.node(leader).port, 'k', 100);
    await expectHeld(c.node(leader).port, held);
  });

  it('ticketing status shows each node\'s role, term, leader, and commit and applied index', async () => {
    const c = await raftCluster(['a', 'b', 'c'], ['--http', '127.0.0.1:0']);
    const leader = await leaderOf(c);
    await c.waitForActives([leader]);
    await holdMany(c.node(leader).port, 's', 5);
    const r = await runCli(['status', '--addr', c.nodes.map((n) => n.server!.http!).join(',')]);
    expect(r.code).toBe(0);
    for (const n of c.nodes) {
      const role = n.name === leader ? 'leader' : 'follower';
      expect(r.stdout).toMatch(new RegExp(`^${n.name} +${role} .*\\(term \\d+, leader ${leader}, commit \\d+, applied \\d+\\)`, 'm'));
    }
    expect(r.stdout).toContain(`serving clients: 127.0.0.1:${c.node(leader).port}`);
  });

  it('counts its WAL writes and appends in /status and /metrics: entries per fsync and per message (group commit)', async () => {
    const c = await raftCluster(['a', 'b', 'c'], ['--http', '127.0.0.1:0']);
    const leader = await leaderOf(c);
    await c.waitForActives([leader]);
    const io = async (name: string) => ((await (await fetch(`http://${c.node(name).server!.http!}/status`)).json()) as { raft: { io: Record<string, number> } }).raft.io;
    const before = await io(leader);
    await holdMany(c.node(leader).port, 'io', 200); // one pipelined burst: far fewer writes than entries
    const after = await io(leader);
    const entries = after.walEntries! - before.walEntries!;
    const writes = after.walWrites! - before.walWrites!;
    expect(entries).toBeGreaterThanOrEqual(200);
    expect(writes).toBeGreaterThan(0);
    expect(writes).toBeLessThan(entries / 4);
    expect(after.appendEntriesSent! - before.appendEntriesSent!).toBeGreaterThanOrEqual(2 * 200); // every entry to both followers
    const metrics = await (await fetch(`http://${c.node(leader).server!.http!}/metrics`)).text();
    expect(metrics).toMatch(new RegExp(`^ticketing_raft_wal_entries_total\\{[^}]*\\} ${after.walEntries}$|^ticketing_raft_wal_entries_total ${after.walEntries}$`, 'm'));
    for (const name of ['ticketing_raft_wal_writes_total', 'ticketing_raft_appends_sent_total', 'ticketing_raft_append_entries_sent_total']) expect(metrics).toMatch(new RegExp(`^${name}[ {]`, 'm'));
  });

  it('keeps every acknowledged lock through kill -9 of the leader, and tokens keep growing', async () => {
    const c = await raftCluster();
    const first = await leaderOf(c);
    const held = await holdMany(c.node(first).port, 'held', 300);
    await c.kill(first);
    const second = await leaderOf(c, c.nodes.map((n) => n.name).filter((n) => n !== first));
    await expectHeld(c.node(second).port, held);
    expect(await grant(c.node(second).port, 'after')).toBeGreaterThan(max(held.values()));
    // The old leader comes back as a follower and catches up.
    await c.start(first);
    await c.waitForActives([second]);
    const w = await Wire.open(c.node(second).port);
    w.send([...held].map(([k, t]) => `R ${k} ${t}\n`).join(''));
    expect(await w.lineCount(held.size, 10_000)).toEqual([...held.keys()].map((k) => `R ${k}`));
  });

  it('a leader cut off from the majority steps down; the majority elects another and serves', async () => {
    const c = await raftCluster(['a', 'b', 'c'], [], true);
    const old = await leaderOf(c);
    const others = c.nodes.map((n) => n.name).filter((n) => n !== old);
    const before = await holdMany(c.node(old).port, 'p', 20);
    c.partition([old], others);
    const next = await leaderOf(c, others);
    // The isolated old leader cannot commit: it stops answering as leader (CheckQuorum).
    const t0 = performance.now();
    while ((await c.roleOf(old)).role === 'active') {
      expect(performance.now() - t0).toBeLessThan(5_000);
      await new Promise((r) => setTimeout(r, 50));
    }
    await expectHeld(c.node(next).port, before);
    const after = await grant(c.node(next).port, 'during-partition');
    expect(after).toBeGreaterThan(max(before.values()));
    c.heal();
    await c.waitForActives([next]);
  });

  it('a paused leader (SIGSTOP) is replaced, and steps down when it resumes', async () => {
    const c = await raftCluster();
    const old = await leaderOf(c);
    const held = await holdMany(c.node(old).port, 's', 10);
    c.node(old).server!.proc.kill('SIGSTOP');
    try {
      const next = await leaderOf(c, c.nodes.map((n) => n.name).filter((n) => n !== old));
      await expectHeld(c.node(next).port, held);
      c.node(old).server!.proc.kill('SIGCONT');
      await c.waitForActives([next]);
    } finally {
      c.node(old).server?.proc.kill('SIGCONT');
    }
  });

  it('keeps the lock table and the token order across a whole-cluster restart', async () => {
    const c = await raftCluster();
    const leader = await leaderOf(c);
    const held = await holdMany(c.node(leader).port, 'r', 50);
    for (const n of c.nodes) await c.kill(n.name);
    for (const n of c.nodes) await c.start(n.name);
    const again = await leaderOf(c);
    await expectHeld(c.node(again).port, held);
    expect(await grant(c.node(again).port, 'after-restart')).toBeGreaterThan(max(held.values()));
  });

  it('rebuilds a node replaced with an empty data directory from a snapshot', async () => {
    const c = await raftCluster(['a', 'b', 'c'], ['--raft-snapshot-entries', '100']);
    const leader = await leaderOf(c);
    const victim = c.nodes.map((n) => n.name).find((n) => n !== leader)!;
    const held = await holdMany(c.node(leader).port, 'z', 400); // several snapshots' worth
    await c.kill(victim);
    rmSync(c.dataDir(victim), { recursive: true, force: true });
    await c.start(victim, ['--raft-join']);
    const t0 = performance.now();
    while (!/installed a snapshot from the leader/.test(c.node(victim).server!.stderr())) {
      expect(performance.now() - t0).toBeLessThan(10_000);
      await new Promise((r) => setTimeout(r, 50));
    }
    // With the third node gone, the replaced one is needed for every commit.
    const third = c.nodes.map((n) => n.name).find((n) => n !== leader && n !== victim)!;
    await c.kill(third);
    await expectHeld(c.node(leader).port, held);
    expect(await grant(c.node(leader).port, 'needs-the-new-node')).toBeGreaterThan(max(held.values()));
  });
});
