/**
 * `ticketing snapshot save` as an operator takes it at the end of a Raft
 * run: online from the leader (what `GET /snapshot` serves) and offline from
 * the leader's data directory as it stands (what `save --data-dir` reads once
 * the node is stopped). Each backup's token floor must be above every token a
 * client was granted, each of its locks' tokens below that floor, and the file
 * must read back as written: a restore from it would otherwise issue a token
 * already issued. (A leader's disk holds every committed entry; one the faults
 * damaged is refused offline, rightly, and only its online backup is checked.)
 */
import { isDeepStrictEqual } from 'node:util';
import { isGrant, type Operation } from '@ticketing/checker';
import { backupOfDataDir, encodeBackup, parseBackup, type Backup } from '@ticketing/server';
import { DATA_DIR, type SimMachine } from './machine.js';
import { readOnlyDisk } from './sim-fs.js';

/** Why a backup of this run's leader would not do, or undefined. */
export function backupViolation(machines: readonly SimMachine[], history: readonly Operation[], damaged: (m: SimMachine) => boolean): string | undefined {
  const leader = machines
    .filter((m) => m.state === 'up' && m.node?.role === 'leader')
    .sort((a, b) => (b.node!.status().raft?.term ?? 0) - (a.node!.status().raft?.term ?? 0))[0];
  if (leader === undefined) return undefined; // no leader at the end: the liveness probe reports that
  let highest = 0n;
  for (const op of history) if (isGrant(op) && op.token > highest) highest = op.token;
  const online = leader.node!.backup();
  if (online === undefined) return `the leader ${leader.name} gave no backup`;
  // A disk the faults damaged is refused offline (CorruptStorage), as it should be: nothing to check there.
  const offline = damaged(leader) ? undefined : backupOfDataDir(readOnlyDisk(leader.fs), DATA_DIR, leader.nodeName, new Date(0));
  for (const [what, b] of [['online', online], ['offline', offline]] as const) {
    if (b === undefined) continue;
    const broken = floorViolation(b, highest) ?? (isDeepStrictEqual(parseBackup(encodeBackup(b)), b) ? undefined : 'it does not read back as written');
    if (broken !== undefined) return `the ${what} backup of ${leader.name}: ${broken}`;
  }
  return undefined;
}

function floorViolation(b: Backup, highestGranted: bigint): string | undefined {
  if (b.tokenFloor <= highestGranted) return `token floor ${b.tokenFloor} is not above token ${highestGranted}, granted to a client`;
  const above = b.locks.find(([, token]) => BigInt(token) >= b.tokenFloor);
  return above === undefined ? undefined : `lock ${above[0]} holds token ${above[1]}, not below the floor ${b.tokenFloor}`;
}
