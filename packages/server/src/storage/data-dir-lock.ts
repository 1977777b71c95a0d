/**
 * One node per data directory: two nodes sharing one would issue the same
 * tokens. The lock is a kernel lock on the file LOCK (Disk.lockFile: held
 * while the process lives, dropped by the kernel when it dies, enforced
 * across PID namespaces), not a pid written in a file: a node in another
 * container sees no process with that pid and used to take the directory
 * over. The file's content only tells people who holds it. Releasing closes
 * our lock and never removes the file, so it never touches a lock someone
 * else took since.
 */
import { join } from 'node:path';
import { DataDirInUseError } from '../errors.js';
import type { Disk, DiskLock } from '../seams/disk.js';
import { mkdirDurable } from './durable-dir.js';

const LOCK_FILE = 'LOCK';

export class DataDirLock {
  private constructor(private readonly lock: DiskLock) {}

  /** Locks `dir` (created 0700 if missing) for this process; `holder` is written into LOCK for people. */
  static acquire(disk: Disk, dir: string, holder: string): DataDirLock {
    mkdirDurable(disk, dir);
    const path = join(dir, LOCK_FILE);
    const lock = disk.lockFile(path);
    if (lock === undefined) {
      const who = readHolder(disk, path);
      throw new DataDirInUseError(`data directory ${dir} is in use by another process${who === '' ? '' : ` (${who})`}; stop it first`);
    }
    lock.write(`${holder}\n`);
    return new DataDirLock(lock);
  }

  release(): void {
    this.lock.release();
  }
}

function readHolder(disk: Disk, path: string): string {
  try {
    return disk.readFile(path).toString('utf8').trim().slice(0, 200);
  } catch {
    return '';
  }
}
