/**
 * `ticketing lock` keeps its lock for a 6-minute command under Raft leader kills (kill -9) and a restart
 * (issue 29's done-when; what is checked: test/long/keep-alive.ts). Left out of the
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
  it(`keeps its lock for ${COMMAND_S} s with a ${LEASE_S} s lease across a Raft leader kill (kill -9) and the restart`, async () => {
    cluster = await TestCluster.create(['a', 'b', 'c'], { dataDirs: true, extraArgs: ['--mode', 'raft'] });
    await cluster.startAll();
    const c = cluster;
    await holdThrough(c, async (at) => {
      await at(COMMAND_S * 0.25);
      const leader = await servingNode(c);
      await c.kill(leader, 'SIGKILL');
      await at(COMMAND_S * 0.45);
      await c.start(leader);
      await at(COMMAND_S * 0.7);
      // And the leader of the moment too.
      await c.kill(await servingNode(c), 'SIGKILL');
    });
  }, TIMEOUT_MS);
});
