/**
 * Seeds the simulator found on its own, each with the defect it caught when
 * that defect's fix is undone (`npm run sim:mutations`) or on the code before
 * a fix. On today's code every one of them must pass.
 *
 * A seed reproduces its defect only on the simulator it was found with (any
 * change to the simulator or the node changes what a seed does). The first
 * group was found by the simulator as it is now; the second by earlier
 * versions of it (docs/verify.md lists which), kept because those runs went
 * through states that once broke a node. The list is regression-seeds.json.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DEFAULT_OPTIONS, simulate } from '../src/simulation.js';

/**
 * A seed and how it ran: the mode (default raft), whether it was a swarm seed
 * (`--swarm`), and the mutation of `npm run sim:mutations` (its name's first
 * word) that makes it fail: `npm run sim:mutations -- --regressions` checks
 * that each still does, and names those to replace.
 */
interface Case {
  readonly name: string;
  readonly seed: number;
  readonly nodes: number;
  readonly mode?: 'raft' | 'priority';
  readonly swarm?: boolean;
  readonly mutation?: string;
  /** A calm run's spacing of faults and length (`--fault-gap`, `--duration`), when not the default. */
  readonly faultGapMs?: number;
  readonly durationMs?: number;
  /** Pauses are OS suspends (`--os-suspend`). */
  readonly osSuspend?: boolean;
}

const { foundByThisSimulator, foundByEarlierVersions } = JSON.parse(readFileSync(new URL('./regression-seeds.json', import.meta.url), 'utf8')) as Record<string, Case[]>;

describe('whole-node simulation: seeds that found defects', () => {
  for (const { name, seed, nodes, mode = 'raft', swarm = false, faultGapMs = DEFAULT_OPTIONS.faultGapMs, durationMs = DEFAULT_OPTIONS.durationMs, osSuspend = false } of [...foundByThisSimulator!, ...foundByEarlierVersions!]) {
    it(`${name} (${swarm ? 'swarm ' : ''}seed ${seed}, ${nodes} nodes, ${mode})`, async () => {
      const r = await simulate({ ...DEFAULT_OPTIONS, seed, nodes, mode, swarm, faultGapMs, durationMs, osSuspend });
      const calm = faultGapMs === DEFAULT_OPTIONS.faultGapMs ? '' : ` --fault-gap ${faultGapMs}`;
      const replay = `npm run sim -- --seed ${seed} --mode ${mode} --nodes ${nodes}${swarm ? ' --swarm' : ''}${osSuspend ? ' --os-suspend' : ''}${calm} --duration ${durationMs} --trace 300`;
      expect(r.ok, `${r.failure ?? ''}\nreplay: ${replay}`).toBe(true);
    });
  }
});
