/**
 * Kernel-enforced file locks for the real disk. Node has no flock(2), so
 * this uses fs-native-extensions (a small N-API addon, prebuilt for Linux,
 * macOS and Windows; one binary serves every Node version): on Linux an
 * open file description lock (fcntl F_OFD_SETLK), elsewhere flock(2) or
 * LockFileEx. The kernel holds it for as long as the file stays open, drops
 * it when the process dies (SIGKILL included), and enforces it for every
 * process on the machine whatever PID namespace it runs in: a pid in a file
 * proves none of that (issue 25, finding 10). Unlike a POSIX record lock,
 * an OFD lock is not released when some other descriptor of the same file
 * is closed elsewhere in the process.
 *
 * The addon is loaded on first use, so a node without a data directory
 * (--memory) never needs it; a single executable that carries no
 * node_modules finds it beside itself (fs-native-extensions.node).
 */
import { closeSync, constants, ftruncateSync, openSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

interface Binding {
  tryLock(fd: number, offset?: number, length?: number, opts?: { shared?: boolean }): boolean;
  unlock(fd: number): void;
}

let binding: Binding | undefined;

function load(): Binding {
  if (binding !== undefined) return binding;
  const require = createRequire(import.meta.url);
  try {
    binding = require('fs-native-extensions') as Binding;
  } catch (err) {
    // A single executable: the prebuilt addon next to it, loaded directly.
    const beside = join(dirname(process.execPath), 'fs-native-extensions.node');
    const module = { exports: {} as Record<string, unknown> };
    try {
      process.dlopen(module, beside);
    } catch {
      throw new Error(`cannot load the file-lock module fs-native-extensions (${(err as Error).message.split('\n')[0]}); reinstall, or run with --memory`, { cause: err });
    }
    const raw = module.exports as unknown as { tryLock(fd: number, offset: number, length: number, exclusive: boolean): void; unlock(fd: number, offset: number, length: number): void };
    binding = {
      tryLock: (fd) => {
        try {
          raw.tryLock(fd, 0, 0, true);
          return true;
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code === 'EAGAIN') return false;
          throw e;
        }
      },
      unlock: (fd) => raw.unlock(fd, 0, 0),
    };
  }
  return binding;
}

export interface HeldLock {
  /** Replaces the locked file's content (who holds it, for people). */
  write(text: string): void;
  /** Unlocks and closes; the file stays (removing it could unlink a file a new owner just locked). */
  release(): void;
}

/** An exclusive kernel lock on `path` (created 0600 if missing), or undefined when another holder has it. */
export function lockFile(path: string): HeldLock | undefined {
  const lock = load();
  const fd = openSync(path, constants.O_RDWR | constants.O_CREAT, 0o600);
  let locked: boolean;
  try {
    locked = lock.tryLock(fd);
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  if (!locked) {
    closeSync(fd);
    return undefined;
  }
  let open = true;
  return {
    write: (text) => {
      ftruncateSync(fd, 0);
      writeSync(fd, `pid ${process.pid}, ${text}`, 0);
    },
    release: () => {
      if (!open) return;
      open = false;
      lock.unlock(fd);
      closeSync(fd);
    },
  };
}
