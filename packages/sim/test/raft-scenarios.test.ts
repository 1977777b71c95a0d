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
});
