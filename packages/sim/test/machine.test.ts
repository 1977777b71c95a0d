/**
 * The simulated machine's operator actions, put together by hand: what the
 * seeded runs rely on when they restart a node.
 */
import { describe, expect, it } from 'vitest';
import { SimCluster } from '../src/sim-cluster.js';

describe('simulated machine', () => {
  it('a graceful restart starts the node again after it has exited, however long its hand-off takes (fresh seed 3244010225)', async () => {
    const c = new SimCluster({ seed: 11, names: ['n1', 'n2'], mode: 'priority' });
    c.startAll();
    const active = await c.waitForLeader();
    const standby = c.machines.find((m) => m !== active)!;
    await c.waitFor('a standby following', () => standby.node?.status().priority?.role === 'standby');
    await c.runFor(1_000); // its stream up and acknowledged
    // The standby freezes: the active's hand-off waits for a TAKEN that never comes.
    standby.clock.pause(true);
    c.net.pauseHost(standby.name);
    const startsBefore = active.starts;
    active.gracefulRestart(10);
    await c.runFor(500);
    expect(active.state, 'still handing off, long after the restart delay').toBe('up');
    expect(active.starts).toBe(startsBefore);
    await c.waitFor('the node started again', () => active.starts === startsBefore + 1, 5_000);
    standby.clock.resume();
    c.net.resumeHost(standby.name);
    await c.waitFor('the restarted node up', () => active.state === 'up', 5_000);
  });
});
