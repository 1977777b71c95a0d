/**
 * Swarm testing (Groce et al., "Swarm Testing", ISSTA 2012): each seed draws
 * its own profile, a random subset of the fault kinds and its own load and
 * snapshot spacing. One run that mixes every fault at one rate makes some
 * sequences rare: a leader that keeps taking pipelined requests while cut off
 * from its peers, then meets a snapshot taken inside its uncommitted tail,
 * needs the other faults to stay away long enough. Leaving kinds out makes
 * the rest deeper.
 *
 * A swarm seed is a different run from the same seed without `--swarm`: the
 * profile is drawn at its start, from the seed's own generator.
 */
import { FAULT_KINDS, type FaultKind } from './faults.js';
import { OPERATOR_ACTIONS, type OperatorAction } from './operator.js';
import type { Scheduler } from './scheduler.js';

/** Faults only swarm runs inject (adding them to the default mix would replay no earlier seed). */
export const SWARM_ONLY_FAULT_KINDS = ['leader-cut'] as const satisfies readonly FaultKind[];

export interface SwarmProfile {
  readonly faultKinds: readonly FaultKind[];
  readonly faultGapMs: number;
  readonly clients: number;
  readonly pipeliningClients: number;
  readonly libraryClients: number;
  readonly keys: number;
  readonly snapshotEntries: number;
  readonly operatorActions: readonly OperatorAction[];
}

export function drawSwarmProfile(sched: Scheduler): SwarmProfile {
  const all: readonly FaultKind[] = [...FAULT_KINDS, ...SWARM_ONLY_FAULT_KINDS];
  let faultKinds = all.filter(() => sched.chance(0.5));
  if (faultKinds.length === 0) faultKinds = [sched.pick(all)];
  return {
    faultKinds,
    faultGapMs: sched.pick([150, 300, 600]),
    clients: sched.int(1, 6),
    pipeliningClients: sched.int(0, 3),
    libraryClients: sched.int(0, 2),
    keys: sched.pick([1, 2, 4, 8]),
    snapshotEntries: sched.pick([10, 20, 50, 200]),
    operatorActions: OPERATOR_ACTIONS.filter(() => sched.chance(0.5)),
  };
}

export function describeSwarmProfile(p: SwarmProfile): string {
  return (
    `swarm profile: faults ${p.faultKinds.join(',')} every ~${p.faultGapMs} ms; ` +
    `${p.clients} clients, ${p.pipeliningClients} pipelining, ${p.libraryClients} library, ${p.keys} keys; snapshot every ${p.snapshotEntries} entries; ` +
    `operator: ${p.operatorActions.join(',') || 'none'}`
  );
}
