/** The real world: the system clock, TCP/TLS, the file system, Math.random. */
import { NO_PROBES, type Environment } from './environment.js';
import { netTransport } from './net-transport.js';
import { nodeDisk } from './node-disk.js';
import { systemClock } from './system-clock.js';

/** `given`, with the real implementation for each part not given. */
export function realEnvironment(given: Partial<Environment> = {}): Environment {
  return {
    clock: given.clock ?? systemClock,
    transport: given.transport ?? netTransport,
    disk: given.disk ?? nodeDisk,
    random: given.random ?? Math.random,
    probes: given.probes ?? NO_PROBES,
  };
}
