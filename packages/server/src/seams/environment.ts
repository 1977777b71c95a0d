/**
 * Everything a node gets from the world: time, the network, files, and
 * randomness. A node touches the world only through these, so a simulation
 * can pass fakes for all four and run many nodes in one process with no real
 * I/O; `realEnvironment` fills in what is not given.
 */
import type { Clock } from './clock.js';
import type { Disk } from './disk.js';
import type { Transport } from './transport.js';

export interface Environment {
  readonly clock: Clock;
  readonly transport: Transport;
  readonly disk: Disk;
  /** Uniform in [0, 1) (Raft election jitter). */
  readonly random: () => number;
  /** The simulator's hooks (none in production: see Probes). */
  readonly probes: Probes;
}

/**
 * What the whole-node simulator reaches into the code with; in production
 * nothing fires and nothing is counted.
 *
 * - `buggify(point)`: a fault point (FoundationDB's BUGGIFY). The code asks
 *   at a place where it may legitimately behave in an unusual way (send a
 *   snapshot in tiny chunks, take a snapshot now, hand leadership over), and
 *   the simulator's seeded generator says whether it does this time.
 * - `reached(path)`: a rare path was taken (a snapshot installed on a log
 *   that kept its suffix, a membership change): the simulator counts them
 *   per run, and a run that never reached one it requires fails.
 * - `spend(ns)`: the code just did work that takes CPU time in proportion to
 *   a count no I/O shows (a timer wheel catching up on ticks): the
 *   simulator's CPU cost model makes the node busy that much longer, so a
 *   stall of the event loop shows (issue 27, D-3).
 */
export interface Probes {
  buggify(point: string): boolean;
  reached(path: string): void;
  spend(ns: number): void;
}

export const NO_PROBES: Probes = { buggify: () => false, reached: () => {}, spend: () => {} };
