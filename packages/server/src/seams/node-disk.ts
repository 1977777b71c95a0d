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
import type { Disk, DiskFile, DiskFileSync, OpenMode } from './disk.js';
import { lockFile } from './file-lock.js';

const FLAGS: Record<OpenMode, number> = {
  write: constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC,
  'append-dsync': constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND | constants.O_DSYNC,
  'create-exclusive': constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL,
};

/** Owner read and write only, whatever the umask (see disk.ts). */
const FILE_MODE = 0o600;
const DIR_MODE = 0o700;

export const nodeDisk: Disk = {
  mkdir: (dir) => void mkdirSync(dir, { recursive: true, mode: DIR_MODE }),
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
