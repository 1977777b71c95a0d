/**
 * The members a priority node last served with, kept in its data directory
 * (`priority-cluster`: the cluster identity and the peers in order), written
 * once every node of its peers list has answered with that same list. A node
 * restarted with another peers list (another member, order, or a member left
 * out) does not promote until every node of its new list has answered it
 * with the same list: a membership change done on every node goes through,
 * a mistake on one node keeps it out. A node with `--memory` has none, nor
 * one whose peers never all answered (nothing to compare).
 */
import { join } from 'node:path';
import { CorruptStorage } from '../errors.js';
import type { Disk } from '../seams/disk.js';
import { replaceFileDurably } from '../storage/durable-dir.js';

export const MEMBER_RECORD = 'priority-cluster';

export interface MemberRecord {
  readonly identity: string;
  readonly names: readonly string[];
}

/** What `dir` recorded (undefined: nothing yet). */
export function readMemberRecord(disk: Disk, dir: string): MemberRecord | undefined {
  let text: string;
  try {
    text = disk.readFile(join(dir, MEMBER_RECORD)).toString('utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const m = /^([0-9a-f]{16}) ([A-Za-z0-9._,-]{1,2000})\n?$/.exec(text);
  if (m === null) throw new CorruptStorage(`${join(dir, MEMBER_RECORD)} is corrupt (expected a cluster identity and the peers' names); remove it to start as a new member`);
  return { identity: m[1]!, names: m[2]!.split(',') };
}

export async function writeMemberRecord(disk: Disk, dir: string, record: MemberRecord): Promise<void> {
  await replaceFileDurably(disk, join(dir, MEMBER_RECORD), Buffer.from(`${record.identity} ${record.names.join(',')}\n`));
}
