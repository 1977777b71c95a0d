/**
 * Files, injected: the Raft WAL and snapshots, the token reservation and the
 * data-directory lock use only this, so a simulation can run whole nodes on
 * an in-memory disk (and crash them between a write and its fsync). The real
 * one is node-disk.ts (node:fs).
 *
 * Failures are thrown as Errors carrying Node's `code` ('ENOENT' for a
 * missing file, 'EEXIST' for an exclusive create that found one), which is
 * what callers test for.
 */

/**
 * How a file is opened:
 * - 'write': created or emptied, for a whole new file (written, synced, renamed into place);
 * - 'append-dsync': created if missing, every write appended and durable when it returns (O_DSYNC);
 * - 'create-exclusive': created, failing with EEXIST if it exists.
 *
 * Files are created readable and writable by their owner only (0600), and
 * directories 0700, whatever the umask: the data directory holds every held
 * key and the identities that hold them.
 */
export type OpenMode = 'write' | 'append-dsync' | 'create-exclusive';

export interface DiskFile {
  /** Writes all of `data`; resolves with the number of bytes written. */
  write(data: Uint8Array): Promise<number>;
  /** fsync: what was written is durable. */
  sync(): Promise<void>;
  close(): Promise<void>;
}

/** The same, blocking: for the few writes that must be durable before the node goes on (start-up, a token reservation). */
export interface DiskFileSync {
  write(data: Uint8Array): number;
  sync(): void;
  close(): void;
}

export interface Disk {
  /** Creates `dir` and its parents if missing. */
  mkdir(dir: string): void;
  /** The names in `dir`. */
  list(dir: string): string[];
  readFile(path: string): Buffer;
  /** Size in bytes. */
  size(path: string): number;
  /** Cuts the file to `size` bytes (a torn tail). */
  truncate(path: string, size: number): void;
  open(path: string, mode: OpenMode): Promise<DiskFile>;
  openSync(path: string, mode: OpenMode): DiskFileSync;
  /** Atomically replaces `to` with `from` (durable once the directory is synced). */
  rename(from: string, to: string): Promise<void>;
  renameSync(from: string, to: string): void;
  /** fsync of a directory: makes creations, renames and removals in it durable. */
  syncDir(dir: string): Promise<void>;
  syncDirSync(dir: string): void;
  /** Removes a file; a missing one is not an error. */
  unlink(path: string): Promise<void>;
  unlinkSync(path: string): void;
  /**
   * An exclusive lock on `path` (the file is created if missing) that the
   * kernel enforces against every other process and holds until `release()`
   * or the end of this process; undefined when another holder has it.
   */
  lockFile(path: string): DiskLock | undefined;
}

/** A lock taken with Disk.lockFile. */
export interface DiskLock {
  /** Replaces the locked file's content (who holds it, for people reading it). */
  write(text: string): void;
  /** Unlocks and closes; the file stays, so no one else's lock on a new file of that name is ever removed. */
  release(): void;
}
