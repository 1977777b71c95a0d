/**
 * Creating a directory durably: a new directory's name lives in its parent,
 * so it survives a power loss only once the parent is fsynced. Each level
 * created here is synced into its parent, so a node that wrote (and
 * acknowledged) state inside it finds it again after a crash.
 */
import { dirname, basename } from 'node:path';
import type { Disk } from '../seams/disk.js';

export function mkdirDurable(disk: Disk, dir: string): void {
  const parent = dirname(dir);
  if (parent !== dir && !exists(disk, parent)) mkdirDurable(disk, parent);
  if (exists(disk, dir)) return;
  disk.mkdir(dir);
  disk.syncDirSync(parent);
}

function exists(disk: Disk, dir: string): boolean {
  const parent = dirname(dir);
  if (parent === dir) return true; // the root
  try {
    return disk.list(parent).includes(basename(dir));
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') return false;
    throw err;
  }
}
