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
 * - 'create-exclusive': created, failing with EEXIST if it exists (a lock file).
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
  /** Who may hold a data-directory lock on this disk: this node's process id, and whether another's is alive. */
  readonly lockOwner: { readonly pid: number; alive(pid: number): boolean };
}
