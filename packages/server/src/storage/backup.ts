/**
 * Backups: `ticketing snapshot save` and `ticketing snapshot restore`.
 *
 * A backup is what a node must know to go on where another left off: the
 * locks held and the token floor, the smallest token it may issue (above
 * every token the source had issued or reserved). A restore writes a new
 * data directory from it, in any mode: the token high-water mark at the
 * floor, so no mode ever issues a token at or below one the source issued,
 * and in Raft mode a snapshot of the lock table the cluster starts from.
 *
 * The file is text: a JSON header line, then one `key token lease-ms
 * [~owner]` line per held lock (as a Raft snapshot's body). The header's
 * checksum covers its fields and the body; a newer format is refused by name.
 *
 * A backup taken online comes from the node that serves (the active, the
 * Raft leader or a single node), whose table holds every grant it answered.
 * One taken offline from a stopped Raft node's data directory (a cluster that
 * lost its majority) applies every entry that node's log holds, committed or
 * not: a grant that may have committed must keep its token below the floor.
 */
import { join } from 'node:path';
import { keyError, MAX_TOKEN } from '@ticketing/protocol';
import { ConfigError, CorruptStorage, UnsupportedFormat } from '../errors.js';
import { crc32 } from '../raft/crc32.js';
import { isConfigurationCommand, MEMBER_NAME } from '../raft/configuration.js';
import { lockLines, RaftStorage } from '../raft/raft-storage.js';
import type { Disk } from '../seams/disk.js';
import { decodeCommand } from '../state-machine/command-codec.js';
import { IDENTITY_NAME, MAX_LEASE_MS } from '../state-machine/command-check.js';
import type { Token } from '../state-machine/commands.js';
import { LockTable, plainRecord, type LockTableSnapshot } from '../state-machine/lock-table.js';
import { checkDataDirFormat } from './data-dir-format.js';
import { DataDirLock } from './data-dir-lock.js';
import { exists } from './durable-dir.js';
import { MAX_MARK, recordedMark, TokenReservation, type TokenMode } from './token-reservation.js';

/** The backup format this release writes, and the newest it reads. */
export const BACKUP_VERSION = 1;
const KIND = 'ticketing-backup';
const MODES: readonly TokenMode[] = ['single', 'priority', 'raft'];

export interface Backup {
  /** When it was taken (ISO 8601). */
  readonly takenAt: string;
  /** The node it was taken from. */
  readonly node: string;
  /** The mode that issued its tokens. */
  readonly mode: TokenMode;
  /** No token at or above this one was issued: a restored node issues tokens from here up. */
  readonly tokenFloor: Token;
  /** Raft: the log position the locks stand for (0 in the other modes). */
  readonly index: number;
  readonly term: number;
  /** [key, token, lease ms, owner] per held lock. */
  readonly locks: LockTableSnapshot['locks'];
}

interface Header {
  kind: string;
  v: number;
  takenAt: string;
  node: string;
  mode: string;
  tokenFloor: string;
  index: number;
  term: number;
  count: number;
  crc: number;
}

function checksum(h: Omit<Header, 'crc'>, body: string): number {
  return crc32(Buffer.from(`${h.v} ${h.takenAt} ${h.node} ${h.mode} ${h.tokenFloor} ${h.index} ${h.term} ${h.count}\n${body}`, 'utf8'));
}

export function encodeBackup(b: Backup): string {
  const body = lockLines(b.locks);
  const fields = { kind: KIND, v: BACKUP_VERSION, takenAt: b.takenAt, node: b.node, mode: b.mode, tokenFloor: b.tokenFloor.toString(), index: b.index, term: b.term, count: b.locks.length };
  return `${JSON.stringify({ ...fields, crc: checksum(fields, body) })}\n${body}`;
}

/** Reads a backup, checking every value: a damaged or forged file must not restore a smaller floor or a lock no client could hold. */
export function parseBackup(text: string): Backup {
  const nl = text.indexOf('\n');
  let header: Header;
  try {
    header = JSON.parse(nl < 0 ? text : text.slice(0, nl)) as Header;
  } catch {
    throw new CorruptStorage('not a Ticketing backup: its first line is not a JSON header');
  }
  if (header === null || typeof header !== 'object' || header.kind !== KIND) throw new CorruptStorage('not a Ticketing backup (its header does not say ticketing-backup)');
  if (typeof header.v !== 'number' || !Number.isSafeInteger(header.v) || header.v < 1) throw new CorruptStorage('backup header has no valid format version');
  if (header.v > BACKUP_VERSION) throw new UnsupportedFormat(`backup has format ${header.v}, newer than this release reads (${BACKUP_VERSION}): restore it with the release that saved it`);
  const body = nl < 0 ? '' : text.slice(nl + 1);
  if (checksum(header, body) !== header.crc) throw new CorruptStorage('backup checksum mismatch: the file is damaged or was edited');
  if (typeof header.takenAt !== 'string' || Number.isNaN(Date.parse(header.takenAt))) throw new CorruptStorage('backup header: takenAt is not a time');
  if (typeof header.node !== 'string' || !MEMBER_NAME.test(header.node)) throw new CorruptStorage('backup header: node is not a node name');
  if (!MODES.includes(header.mode as TokenMode)) throw new CorruptStorage(`backup header: mode ${JSON.stringify(header.mode)} is not single, priority or raft`);
  const floor = decimal(header.tokenFloor, 'token floor');
  if (floor < 1n || floor >= MAX_MARK) throw new CorruptStorage(`backup header: token floor ${floor} is outside 1..${MAX_MARK - 1n}`);
  for (const [name, n] of [['index', header.index], ['term', header.term]] as const) {
    if (!Number.isSafeInteger(n) || n < 0) throw new CorruptStorage(`backup header: ${name} is not a log position`);
  }
  const locks: Array<readonly [string, string, number, string?]> = [];
  for (const line of body.split('\n')) {
    if (line === '') continue;
    locks.push(parseLock(line, floor));
  }
  if (locks.length !== header.count) throw new CorruptStorage(`backup holds ${locks.length} locks, its header says ${header.count}`);
  return { takenAt: header.takenAt, node: header.node, mode: header.mode as TokenMode, tokenFloor: floor, index: header.index, term: header.term, locks };
}

function parseLock(line: string, floor: Token): readonly [string, string, number, string?] {
  const f = line.split(' ');
  const [key, tokenText, leaseText, owner] = f;
  const bad = (why: string) => new CorruptStorage(`backup lock line ${JSON.stringify(line.slice(0, 80))}: ${why}`);
  if (f.length < 3 || f.length > 4) throw bad('expected key, token, lease ms and an optional ~owner');
  if (keyError(key!) !== undefined) throw bad('not a valid key');
  const token = decimal(tokenText, 'token');
  if (token < 1n || token >= floor) throw bad('its token is not below the token floor');
  const lease = Number(leaseText);
  if (!Number.isSafeInteger(lease) || lease < 1 || lease > MAX_LEASE_MS) throw bad(`lease outside 1..${MAX_LEASE_MS} ms`);
  if (owner !== undefined && !(owner.startsWith('~') && IDENTITY_NAME.test(owner.slice(1)))) throw bad('not a client identity name');
  return owner === undefined ? [key!, token.toString(), lease] : [key!, token.toString(), lease, owner.slice(1)];
}

function decimal(text: unknown, what: string): bigint {
  if (typeof text !== 'string' || !/^[0-9]{1,20}$/.test(text)) throw new CorruptStorage(`backup: ${what} is not a decimal number`);
  const n = BigInt(text);
  if (n > MAX_TOKEN) throw new CorruptStorage(`backup: ${what} ${n} is beyond 2^64-1`);
  return n;
}

/**
 * A backup of a stopped node's data directory (the node must be stopped: its
 * LOCK is taken while reading). Reads only; a torn WAL tail is left for the
 * node's own next start to cut.
 */
export function backupOfDataDir(disk: Disk, dataDir: string, node: string, now: Date): Backup {
  if (!exists(disk, dataDir)) throw new ConfigError(`data directory ${dataDir} does not exist`);
  const lock = DataDirLock.acquire(disk, dataDir, `ticketing snapshot save, since ${now.toISOString()}`);
  try {
    checkDataDirFormat(disk, dataDir, false);
    const mark = recordedMark(disk, dataDir);
    if (!exists(disk, join(dataDir, 'raft'))) {
      if (mark === undefined) throw new ConfigError(`data directory ${dataDir} holds no tokens and no Raft state: is it a Ticketing data directory?`);
      // Single and priority nodes keep no locks on disk: what they held is gone with the process.
      return { takenAt: now.toISOString(), node, mode: mark.mode ?? 'single', tokenFloor: mark.token, index: 0, term: 0, locks: [] };
    }
    const recovery = RaftStorage.inspect(disk, dataDir);
    const table = LockTable.restore(recovery.snapshot?.table ?? { nextToken: '1', locks: [] }, plainRecord);
    const entries = recovery.state.entries;
    for (const e of entries) if (e.command !== '' && !isConfigurationCommand(e.command)) table.apply(decodeCommand(e.command));
    const last = entries.at(-1) ?? recovery.state.snapshot;
    const floor = mark !== undefined && mark.token > table.nextToken ? mark.token : table.nextToken;
    return { takenAt: now.toISOString(), node, mode: 'raft', tokenFloor: floor, index: last.index, term: last.term, locks: table.snapshot().locks };
  } finally {
    lock.release();
  }
}

/**
 * Writes a new data directory `dataDir` (missing or empty) from `backup`, for
 * a node in `mode`: its format, the token floor as the high-water mark, and
 * in Raft mode the locks as a snapshot at the backup's log position (or 1),
 * which the cluster's first leader starts from. The membership comes from
 * the restored node's --peers at its first start.
 */
export async function restoreBackup(disk: Disk, dataDir: string, backup: Backup, mode: TokenMode, now: Date): Promise<void> {
  const lock = DataDirLock.acquire(disk, dataDir, `ticketing snapshot restore, since ${now.toISOString()}`);
  try {
    if (disk.list(dataDir).some((f) => f !== 'LOCK')) {
      throw new ConfigError(`data directory ${dataDir} is not empty: restore into a new directory (never over a node's state)`);
    }
    checkDataDirFormat(disk, dataDir);
    TokenReservation.open(disk, dataDir, 1, backup.tokenFloor, mode);
    if (mode === 'raft') {
      const meta = { index: Math.max(1, backup.index), term: Math.max(1, backup.term) };
      await RaftStorage.seed(disk, dataDir, meta, { nextToken: backup.tokenFloor.toString(), locks: backup.locks });
    }
  } finally {
    lock.release();
  }
}
