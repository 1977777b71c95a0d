/**
 * Durable directories, writes checked for their length, and files replaced
 * atomically, for the stores in the data directory (token reservation, Raft
 * WAL and snapshots).
 *
 * Creating a directory durably: a new directory's name lives in its parent,
 * so it survives a power loss only once the parent is fsynced. Each level
 * created here is synced into its parent, so a node that wrote (and
 * acknowledged) state inside it finds it again after a crash.
 */
import { dirname, basename } from 'node:path';
import { StorageError } from '../errors.js';
import type { Disk, DiskFile, DiskFileSync } from '../seams/disk.js';

export function mkdirDurable(disk: Disk, dir: string): void {
  const parent = dirname(dir);
  if (parent !== dir && !exists(disk, parent)) mkdirDurable(disk, parent);
  if (exists(disk, dir)) return;
  disk.mkdir(dir);
  disk.syncDirSync(parent);
}

/** Whether `dir` (or a file) exists: its name is in its parent's listing. */
export function exists(disk: Disk, dir: string): boolean {
  const parent = dirname(dir);
  if (parent === dir) return true; // the root
  try {
    return disk.list(parent).includes(basename(dir));
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') return false;
    throw err;
  }
}

/**
 * Writes `data` and checks that all of it was written: a full disk answers a
 * write with fewer bytes (Linux), and a file that silently misses its end is
 * worse than an error.
 */
export async function writeAll(file: DiskFile, data: Uint8Array, what: string): Promise<void> {
  const n = await file.write(data);
  if (n !== data.length) throw new StorageError(`short write to ${what} (${n} of ${data.length} bytes): is the disk full?`);
}

export function writeAllSync(file: DiskFileSync, data: Uint8Array, what: string): void {
  const n = file.write(data);
  if (n !== data.length) throw new StorageError(`short write to ${what} (${n} of ${data.length} bytes): is the disk full?`);
}

/**
 * Replaces `path` with `data`, all or nothing, durably: written to
 * `<path>.tmp`, fsynced, renamed over `path`, and the directory fsynced. A
 * crash or a short write leaves only the temporary file, never a partial
 * `path`. `what` names the file in a short-write error.
 */
export async function replaceFileDurably(disk: Disk, path: string, data: Uint8Array, what = `${path}.tmp`): Promise<void> {
  const tmp = `${path}.tmp`;
  const file = await disk.open(tmp, 'write');
  try {
    await writeAll(file, data, what);
    await file.sync();
  } finally {
    await file.close();
  }
  await disk.rename(tmp, path);
  await disk.syncDir(dirname(path));
}

/** replaceFileDurably, synchronously (start-up, and a reservation needed before the next grant). */
export function replaceFileDurablySync(disk: Disk, path: string, data: Uint8Array): void {
  const tmp = `${path}.tmp`;
  const file = disk.openSync(tmp, 'write');
  try {
    writeAllSync(file, data, tmp);
    file.sync();
  } finally {
    file.close();
  }
  disk.renameSync(tmp, path);
  disk.syncDirSync(dirname(path));
}
