/**
 * One node per data directory: two nodes sharing one would issue the same
 * tokens. The lock is a file holding the owner's pid; a lock left by a
 * process that no longer exists (e.g. after SIGKILL) is taken over.
 */
import { join } from 'node:path';
import { DataDirInUseError } from '../errors.js';
import type { Disk } from '../seams/disk.js';
import { mkdirDurable } from './durable-dir.js';

const LOCK_FILE = 'LOCK';

export class DataDirLock {
  private constructor(
    private readonly disk: Disk,
    private readonly path: string,
  ) {}

  static acquire(disk: Disk, dir: string): DataDirLock {
    mkdirDurable(disk, dir);
    const path = join(dir, LOCK_FILE);
    const self = disk.lockOwner.pid;
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const file = disk.openSync(path, 'create-exclusive');
        try {
          file.write(Buffer.from(`${self}\n`));
        } finally {
          file.close();
        }
        return new DataDirLock(disk, path);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const owner = Number.parseInt(disk.readFile(path).toString('utf8'), 10);
      if (Number.isInteger(owner) && owner !== self && disk.lockOwner.alive(owner)) {
        throw new DataDirInUseError(`data directory ${dir} is in use by process ${owner}; stop it first (or remove ${path} if that process is not a Ticketing node)`);
      }
      disk.unlinkSync(path); // stale: its owner is gone
    }
    throw new DataDirInUseError(`cannot lock data directory ${dir}: another process keeps taking ${path}`);
  }

  release(): void {
    this.disk.unlinkSync(this.path);
  }
}
