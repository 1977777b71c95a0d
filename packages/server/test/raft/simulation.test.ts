import { describe, expect, it } from 'vitest';
import { runSeed, type SimOptions } from './simulation.js';

const SEEDS = Number(process.env.RAFT_SIM_SEEDS ?? 2_000);
const FIRST = Number(process.env.RAFT_SIM_FIRST_SEED ?? 1);

const base: Omit<SimOptions, 'seed' | 'nodes'> = {
  steps: 600,
  dropRate: 0.05,
  duplicateRate: 0.02,
  maxDelay: 3,
  faultRate: 0.03,
  snapshotEvery: 40,
};

describe('Raft seeded simulation', () => {
  it(`keeps every safety property and makes progress after healing, over ${SEEDS} seeds`, () => {
    const t0 = performance.now();
    let committed = 0;
    let events = 0;
    for (let seed = FIRST; seed < FIRST + SEEDS; seed++) {
      const nodes = seed % 3 === 0 ? 5 : 3;
      const r = runSeed({ ...base, seed, nodes });
      committed += r.committed;
      events += r.events;
    }
    process.stderr.write(
      `raft simulation: ${SEEDS} seeds, ${events} fault events, ${committed} entries committed, ${((performance.now() - t0) / 1000).toFixed(1)} s (replay one: RAFT_SIM_FIRST_SEED=<seed> RAFT_SIM_SEEDS=1)\n`,
    );
    expect(committed).toBeGreaterThan(SEEDS * 20);
  }, 600_000);

  it('survives a harsher network (20% loss, long delays) on a few seeds', () => {
    for (let seed = 1; seed <= 50; seed++) runSeed({ ...base, seed, nodes: 5, dropRate: 0.2, duplicateRate: 0.1, maxDelay: 8, faultRate: 0.06 });
  }, 600_000); // a limit against a hang: seconds alone, minutes beside the simulator lane on a loaded machine

  it('replays a seed exactly', () => {
    const a = runSeed({ ...base, seed: 4242, nodes: 5 });
    const b = runSeed({ ...base, seed: 4242, nodes: 5 });
    expect(b).toEqual(a);
  });
});
