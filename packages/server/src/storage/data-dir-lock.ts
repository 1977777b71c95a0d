/**
 * One node per data directory: two nodes sharing one would issue the same
 * tokens. The lock is a file holding the owner's pid; a lock left by a
 * process that no longer exists (e.g. after SIGKILL) is taken over.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const LOCK_FILE = 'LOCK';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export class DataDirLock {
  private constructor(private readonly path: string) {}

  static acquire(dir: string): DataDirLock {
    mkdirSync(dir, { recursive: true });
    const path = join(dir, LOCK_FILE);
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        writeFileSync(path, `${process.pid}\n`, { flag: 'wx' });
        return new DataDirLock(path);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const owner = Number.parseInt(readFileSync(path, 'utf8'), 10);
      if (Number.isInteger(owner) && owner !== process.pid && alive(owner)) {
        throw new Error(`data directory ${dir} is in use by process ${owner}; stop it first (or remove ${path} if that process is not a Ticketing node)`);
      }
      rmSync(path, { force: true }); // stale: its owner is gone
    }
    throw new Error(`cannot lock data directory ${dir}: another process keeps taking ${path}`);
  }

  release(): void {
    rmSync(this.path, { force: true });
  }
}
