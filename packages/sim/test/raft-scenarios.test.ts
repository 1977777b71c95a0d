/**
 * Raft situations put together by hand on the simulated machines (each one
 * an issue-27 defect or feature), checked with the Raft invariants after
 * every event. The seeded runs meet them at random; these meet them always.
 */
import { describe, expect, it } from 'vitest';
import { SimCluster } from '../src/sim-cluster.js';

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
});
