/**
 * `ticketing lock` keeps its lock for a 6-minute command under a priority
 * failover (kill -9 of the active) and the hand-back (issue 29's done-when; what is checked: test/long/keep-alive.ts). Left out of the
 * ordinary test run: CI runs test/long in a step of its own, this file beside the other mode's.
 */
import { afterEach, describe, it } from 'vitest';
import { TestCluster } from '@ticketing/test-support';
import { COMMAND_S, holdThrough, LEASE_S, servingNode, TIMEOUT_MS } from './keep-alive.js';

let cluster: TestCluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

describe('ticketing lock with keep-alive: a long command under failovers', () => {
  it(`keeps its lock for ${COMMAND_S} s with a ${LEASE_S} s lease across a priority failover (kill -9 of the active) and the hand-back`, async () => {
    // 3 nodes with --sync-standbys 1: every extension is acknowledged by the next node in line
    // before its X reply, so the node that takes over has it (with 0, an acknowledged extension
    // can be lost in a failover, as a grant can: docs/cluster.md).
    cluster = await TestCluster.create(['a', 'b', 'c'], { dataDirs: true, extraArgs: ['--sync-standbys', '1'] });
    await cluster.startAll();
    const c = cluster;
    await holdThrough(c, async (at) => {
      await at(COMMAND_S * 0.25);
      const active = await servingNode(c);
      await c.kill(active, 'SIGKILL');
      await at(COMMAND_S * 0.45);
      // The higher-priority node returns, catches up, and is handed the lock table back.
      await c.start(active);
    });
  }, TIMEOUT_MS);
});
