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
}
