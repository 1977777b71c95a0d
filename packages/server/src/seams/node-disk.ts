/** The real disk: node:fs. */
import {
  closeSync,
  constants,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  truncateSync,
  writeSync,
} from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Disk, DiskFile, DiskFileSync, OpenMode } from './disk.js';
import { lockFile } from './file-lock.js';

/**
 * mkdir -p, without Node's `recursive: true`: that one loops for ever where a
 * parent exists but cannot hold directories (`/proc/x`: ENOENT, then the
 * parent's EEXIST, then ENOENT again). Here each level is tried once.
 */
function mkdirWithParents(dir: string, mode: number): void {
  try {
    mkdirSync(dir, { mode });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return;
    if (code !== 'ENOENT' || dirname(dir) === dir) throw err;
    mkdirWithParents(dirname(dir), mode);
    try {
      mkdirSync(dir, { mode });
    } catch (again) {
      if ((again as NodeJS.ErrnoException).code !== 'EEXIST') throw again;
    }
  }
}

const FLAGS: Record<OpenMode, number> = {
  write: constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC,
  'append-dsync': constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND | constants.O_DSYNC,
  'create-exclusive': constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL,
};

/** Owner read and write only, whatever the umask (see disk.ts). */
const FILE_MODE = 0o600;
const DIR_MODE = 0o700;

export const nodeDisk: Disk = {
  mkdir: (dir) => mkdirWithParents(dir, DIR_MODE),
  list: (dir) => readdirSync(dir),
  readFile: (path) => readFileSync(path),
  size: (path) => statSync(path).size,
  truncate: (path, size) => truncateSync(path, size),

  async open(path, mode): Promise<DiskFile> {
    const handle = await open(path, FLAGS[mode], FILE_MODE);
    return {
      write: async (data) => (await handle.write(data)).bytesWritten,
      sync: async () => handle.sync(),
      close: async () => handle.close(),
    };
  },

  openSync(path, mode): DiskFileSync {
    const fd = openSync(path, FLAGS[mode], FILE_MODE);
    return {
      write: (data) => writeSync(fd, data),
      sync: () => fsyncSync(fd),
      close: () => closeSync(fd),
    };
  },

  rename: async (from, to) => rename(from, to),
  renameSync: (from, to) => renameSync(from, to),

  async syncDir(dir): Promise<void> {
    const handle = await open(dir, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  },

  syncDirSync(dir): void {
    const fd = openSync(dir, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  },

  unlink: async (path) => rm(path, { force: true }),
  unlinkSync: (path) => rmSync(path, { force: true }),

  lockFile,
};
