/**
 * Seeds the simulator found on its own, each with the defect it caught when
 * that defect's fix is undone (`npm run sim:mutations`) or on the code before
 * a fix. On today's code every one of them must pass.
 *
 * A seed reproduces its defect only on the simulator it was found with (any
 * change to the simulator or the node changes what a seed does). The first
 * group was found by the simulator as it is now; the second by earlier
 * versions of it (docs/verify.md lists which), kept because those runs went
 * through states that once broke a node.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_OPTIONS, simulate } from '../src/simulation.js';

/** A seed and how it ran: the mode (default raft) and whether it was a swarm seed (`--swarm`). */
type Case = [name: string, seed: number, nodes: number, run?: { mode?: 'raft' | 'priority'; swarm?: boolean }];

const FOUND_BY_THIS_SIMULATOR: Case[] = [
  ['defect 10: a new WAL segment not fsynced into its directory', 1, 3],
  ['defect 3: a short write taken as durable', 4, 3],
  ['defect 3, a swarm seed', 3, 3, { swarm: true }],
  ['defect 7: a deposed leader served clients until its loop went idle', 9, 3],
  ['defect 7, a swarm seed', 2, 3, { swarm: true }],
  ['defect 2: damage in the middle of the WAL cut as if it were a torn tail', 36, 3],
  ['defect 2, a swarm seed', 271, 3, { swarm: true }],
  ['defect 5: the durable index kept when a snapshot discarded the log', 356, 3],
  ['defect 5, a swarm seed', 24, 3, { swarm: true }],
  ['defect 4: InstallSnapshot dropped the entries it kept', 1501, 3],
  ["a snapshot's new WAL segment written in place: a short write hid the entries it carried over", 1680, 3, { swarm: true }],
  ['priority: a restarted standby heard nothing from an active still backing off its redial, and promoted under it', 200794, 3, { mode: 'priority' }],
  ["extension X1: a follower that ignored Extend entries ended an extended lease at the grant's after a failover", 3, 3],
  ['priority, issue 26 defect 6: a node restarted with another peer token promoted beside the active it could not link to', 140, 3, { mode: 'priority' }],
  ['priority, issue 26 defect 2: a node without the table promoted over one that held it', 49, 3, { mode: 'priority' }],
  ['priority, issue 26 defect 5: a data directory moved to Raft mode started on a floor of Unix microseconds', 28, 3, { mode: 'priority' }],
  ['priority, issue 26 defect 8: a grant the sync-standbys stall held was delivered after its lease', 55, 3, { mode: 'priority' }],
];

const FOUND_BY_EARLIER_VERSIONS: Case[] = [
  ['defect 4: InstallSnapshot dropped the entries it kept', 727, 3],
  ['defect 7: a deposed leader served clients until its loop went idle', 8, 3],
  ['defect 5: the durable index kept when a snapshot discarded the log', 530, 3],
  ['defect 3: a short write taken as durable', 11, 3],
  ['defect 7: a deposed leader served clients until its loop went idle', 24, 3],
  ['defect 1: a definite T written after a dropped reply at step-down', 90, 3],
  ['defect 6: a joining node voted and campaigned', 116, 3],
  ['defect 1, again', 926, 3],
  ['defect 2: damage in the middle of the WAL cut as if it were a torn tail', 1036, 3],
  ['a short write to a snapshot file renamed into place', 1571, 3],
  ['a node stopped by a disk error came back only through its supervisor', 2610, 3],
  ['a T decided on uncommitted state, held behind a queued acquire, written after step-down', 208212, 3],
  ['the same, another interleaving', 212789, 3],
  ['a restart did not fsync the directory holding a segment a crash left unsynced', 212273, 3],
  ['two founders that learned of the first commit late turned joining beside a wiped third: no leader', 610610, 3],
  ['priority: a node restarted within its 2 s token reservation issued tokens its successor undercut', 9, 3, { mode: 'priority' }],
  ['priority: the same, another interleaving', 87, 3, { mode: 'priority' }],
  ['priority: a successor promoted on a refused connection served before its clock passed the dead active\'s tokens', 2437, 3, { mode: 'priority' }],
  ['a fatal stop hung on a half-finished peer handshake', 100166, 5],
];

describe('whole-node simulation: seeds that found defects', () => {
  for (const [name, seed, nodes, { mode = 'raft', swarm = false } = {}] of [...FOUND_BY_THIS_SIMULATOR, ...FOUND_BY_EARLIER_VERSIONS]) {
    it(`${name} (${swarm ? 'swarm ' : ''}seed ${seed}, ${nodes} nodes, ${mode})`, async () => {
      const r = await simulate({ ...DEFAULT_OPTIONS, seed, nodes, mode, swarm });
      const replay = `npm run sim -- --seed ${seed} --mode ${mode} --nodes ${nodes}${swarm ? ' --swarm' : ''} --trace 300`;
      expect(r.ok, `${r.failure ?? ''}\nreplay: ${replay}`).toBe(true);
    });
  }
});
