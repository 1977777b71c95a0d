/**
 * Raft situations put together by hand on the simulated machines (each one
 * an issue-27 defect or feature), checked with the Raft invariants after
 * every event. The seeded runs meet them at random; these meet them always.
 */
import { check, formatVerdict } from '@ticketing/checker';
import type { MembershipRequest } from '@ticketing/server';
import { describe, expect, it } from 'vitest';
import { tokenViolation } from '../src/client-checks.js';
import type { SimMachine } from '../src/machine.js';
import { SimCluster } from '../src/sim-cluster.js';
import { Workload } from '../src/workload.js';

/** Asks the leader (whichever node it is now) for `request`, retrying on another node while none answers. */
async function member(c: SimCluster, request: MembershipRequest): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const leader = await c.waitForLeader();
    try {
      await c.settle(leader.node!.membership()!.change(request, 5_000));
      return;
    } catch (err) {
      if (attempt >= 20) throw err;
      await c.runFor(200); // not the leader any more, or the learner is still catching up
    }
  }
}

/** Starts a new machine `name` (an empty disk) with `peers` as its --peers, as an operator would after `member add`. */
function startNode(c: SimCluster, name: string, peers: readonly string[]): SimMachine {
  const m = c.add(name, peers);
  m.start();
  return m;
}

function checkHistory(c: SimCluster, history: Parameters<typeof check>[0]): void {
  const verdict = check(history, { slackMs: 4_000, ghostReleases: true });
  expect(verdict.anomalies, formatVerdict(verdict, 5)).toEqual([]);
  expect(tokenViolation(history, () => false)).toBeUndefined();
  expect(history.filter((o) => o.outcome === 'granted').length).toBeGreaterThan(20);
}

describe('raft scenarios', () => {
  it('a leader stopped by SIGTERM redirects its clients to another node, never to itself (D-7)', async () => {
    const c = new SimCluster({ seed: 7, names: ['n1', 'n2', 'n3'] });
    c.startAll();
    const leader = await c.waitForLeader();
    const redirects: Array<string | undefined> = [];
    const conn = c.connect('client', leader, { redirected: (a) => redirects.push(a) });
    conn.acquire('k', 5, 10);
    conn.acquire('k', 5, 10); // queued behind the first: answered T at the step-down
    await c.runFor(200);
    void leader.node!.shutdown();
    await c.waitFor('the redirect', () => redirects.length > 0, 2_000);
    expect(redirects[0]).not.toBe(leader.address);
  });

  it('a leader whose disk fails redirects its clients to another node, never to itself (D-7)', async () => {
    const c = new SimCluster({ seed: 8, names: ['n1', 'n2', 'n3'] });
    c.startAll();
    const leader = await c.waitForLeader();
    const redirects: Array<string | undefined> = [];
    // An idle connection (its replies all written) hears M when the node stops serving.
    const idle = c.connect('idle', leader, { redirected: (a) => redirects.push(a) });
    idle.acquire('a', 0, 10);
    await c.runFor(200);
    leader.fs.faults.eioWrite = 1; // the next WAL write fails: the node stops
    c.connect('client', leader).acquire('b', 5, 10);
    await c.waitFor('the redirect', () => redirects.length > 0, 2_000);
    expect(redirects[0]).not.toBe(leader.address);
  });

  it('answers pings, T and N after a leadership check, with no log entry for them (D-12)', async () => {
    const c = new SimCluster({ seed: 9, names: ['n1', 'n2', 'n3'] });
    c.startAll();
    const leader = await c.waitForLeader();
    const holder = c.connect('holder', leader);
    let token = 0n;
    holder.acquire('held', 0, 30, (o) => (token = o.kind === 'granted' ? o.token : 0n));
    await c.waitFor('the grant', () => token !== 0n, 2_000);
    await c.runFor(300);
    const before = leader.node!.raftLog()!.status.lastIndex;
    const reader = c.connect('reader', leader);
    const answers: string[] = [];
    for (let i = 0; i < 30; i++) {
      c.sched.after(i * 7, 'reader: next', () => {
        reader.ping((o) => answers.push(o.kind));
        reader.acquire('held', 0, 5, (o) => answers.push(o.kind));
        reader.release('held', token + 1n, (o) => answers.push(o.kind));
      });
    }
    await c.waitFor('the answers', () => answers.length === 90, 5_000);
    expect(new Set(answers)).toEqual(new Set(['pong', 'timeout', 'not-held']));
    // Every read waited for a fresh round of heartbeats, not for an entry of its own.
    expect(leader.node!.raftLog()!.status.lastIndex).toBe(before);
  });

  it('growing 3 -> 5 by restarting a node with a 5-node --peers list and starting two empty ones makes no second leader (item 1, D-10)', async () => {
    const c = new SimCluster({ seed: 10, names: ['n1', 'n2', 'n3'] });
    c.startAll();
    await c.waitForLeader();
    await c.runFor(500);
    // The obvious way, which made two majorities: n3 restarted with five peers, n4 and n5 new with them.
    const five = ['n1', 'n2', 'n3', 'n4', 'n5'];
    const n3 = c.machine('n3');
    if (c.leader() === n3) {
      void n3.node!.shutdown(); // keep the old cluster's leader among n1, n2
      await c.waitFor('n3 stopped', () => n3.state === 'down', 3_000);
    } else n3.kill();
    n3.options = { ...n3.options, peers: five };
    c.add('n4', five);
    c.add('n5', five);
    for (const m of c.machines) if (m.state === 'down') m.start();
    let most = 0;
    for (let t = 0; t < 40; t++) {
      await c.runFor(100);
      most = Math.max(most, c.machines.filter((m) => m.state === 'up' && m.node?.role === 'leader').length);
    }
    expect(most).toBe(1);
    // And no two nodes grant one key.
    const granted: string[] = [];
    for (const m of c.machines) c.connect(`client-${m.name}`, m).acquire('split/key', 0, 30, (o) => o.kind === 'granted' && granted.push(m.name));
    await c.runFor(1_000);
    expect(granted.length).toBeLessThanOrEqual(1);
  });

  it('grows 3 -> 5 -> 3 through the membership API under load: linearizable, one leader per term, tokens increasing', async () => {
    const c = new SimCluster({ seed: 11, names: ['n1', 'n2', 'n3'] });
    c.startAll();
    await c.waitForLeader();
    const w = new Workload(c.sched, c.net, { clients: 4, pipeliningClients: 1, libraryClients: 0, keys: 4, servers: c.machines.map((m) => m.address), until: 60_000 });
    w.start();
    await c.runFor(500);
    const all = ['n1', 'n2', 'n3', 'n4', 'n5'];
    for (const name of ['n4', 'n5']) {
      await member(c, { op: 'add', name, address: `${name}:5225` });
      startNode(c, name, all);
      await member(c, { op: 'promote', name });
    }
    const five = c.leader()!.node!.membership()!.view();
    expect(five.members.map((m) => `${m.name}${m.voter ? '' : '~'}`)).toEqual(all);
    await c.runFor(1_000);
    for (const name of ['n5', 'n4']) {
      if (c.leader()?.name === name) await c.settle(c.leader()!.node!.membership()!.transfer(undefined, 5_000));
      await member(c, { op: 'remove', name });
      void c.machine(name).node?.shutdown();
    }
    await c.runFor(1_000);
    expect(c.leader()!.node!.membership()!.view().members.map((m) => m.name)).toEqual(['n1', 'n2', 'n3']);
    w.closeAll();
    await c.runFor(500);
    checkHistory(c, w.history);
  });

  it('replaces a dead node and moves another to a new address under load', async () => {
    const c = new SimCluster({ seed: 12, names: ['n1', 'n2', 'n3'] });
    c.startAll();
    await c.waitForLeader();
    const w = new Workload(c.sched, c.net, { clients: 4, pipeliningClients: 1, libraryClients: 0, keys: 4, servers: c.machines.map((m) => m.address), until: 60_000 });
    w.start();
    await c.runFor(500);
    // n3's machine dies for good: add n4 in its place, then remove n3.
    const dead = c.leader()!.name === 'n3' ? 'n2' : 'n3';
    c.machine(dead).kill();
    const survivors = ['n1', 'n2', 'n3'].filter((n) => n !== dead);
    await member(c, { op: 'add', name: 'n4', address: 'n4:5225' });
    startNode(c, 'n4', [...survivors, dead, 'n4']);
    await member(c, { op: 'promote', name: 'n4' });
    await member(c, { op: 'remove', name: dead });
    await c.runFor(1_000);
    // Move n4 to another host: the membership first, then the node starts there on its own disk.
    const n4 = c.machine('n4');
    await member(c, { op: 'update', name: 'n4', address: 'n4b:5225' });
    if (c.leader() === n4) await c.settle(n4.node!.membership()!.transfer(undefined, 5_000));
    void n4.node?.shutdown();
    await c.waitFor('n4 stopped', () => n4.state === 'down', 5_000);
    const moved = c.add('n4b', [...survivors, 'n4=n4b']);
    moved.fs = n4.fs; // the same data directory, on the new machine
    moved.options = { ...moved.options, node: 'n4' };
    moved.start();
    await c.runFor(2_000);
    const view = c.leader()!.node!.membership()!.view();
    expect(view.members.map((m) => `${m.name}=${m.address}`)).toEqual([...survivors.map((n) => `${n}=${n}:5225`), 'n4=n4b:5225']);
    expect(view.members.every((m) => m.reachable)).toBe(true);
    w.closeAll();
    await c.runFor(500);
    checkHistory(c, w.history);
  });

  it('SIGTERM of the leader hands leadership over at once (TimeoutNow), and its clients are sent to the new leader', async () => {
    const c = new SimCluster({ seed: 13, names: ['n1', 'n2', 'n3'] });
    c.startAll();
    const leader = await c.waitForLeader();
    await c.runFor(300);
    const redirects: Array<string | undefined> = [];
    const conn = c.connect('client', leader, { redirected: (a) => redirects.push(a) });
    conn.ping();
    await c.runFor(50);
    const t0 = c.sched.now;
    void leader.node!.shutdown();
    await c.waitFor('another leader', () => c.leader() !== undefined && c.leader() !== leader, 2_000);
    const took = c.sched.now - t0;
    // Well inside one election timeout (200-400 ms here): no election had to time out.
    expect(took).toBeLessThan(100);
    await c.waitFor('the redirect', () => redirects.length > 0, 1_000);
    expect(redirects[0]).toBe(c.leader()!.address);
    // The new leader serves.
    let granted = false;
    c.connect('client2', c.leader()!).acquire('k', 0, 10, (o) => (granted = o.kind === 'granted'));
    await c.waitFor('a grant', () => granted, 1_000);
  });

  it('on a healthy cluster every node reports every peer reachable (the leader\'s view), and a dead one unreachable (item 7)', async () => {
    const c = new SimCluster({ seed: 14, names: ['n1', 'n2', 'n3'] });
    c.startAll();
    await c.waitForLeader();
    await c.runFor(1_000);
    for (const m of c.machines) expect(m.node!.status().peers.map((p) => `${p.name}:${p.reachable}`), m.name).toEqual(c.machines.filter((x) => x !== m).map((x) => `${x.name}:true`));
    const follower = c.machines.find((m) => m !== c.leader())!;
    follower.kill();
    await c.runFor(1_000);
    for (const m of c.machines.filter((x) => x !== follower)) {
      expect(m.node!.status().peers.find((p) => p.name === follower.name)!.reachable, m.name).toBe(false);
    }
  });
});
