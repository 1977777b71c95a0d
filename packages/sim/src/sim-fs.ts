/**
 * A file system that forgets like a real one. It models what a crash keeps:
 *
 * - File data written but not fsynced (nor written through O_DSYNC) lives in
 *   the page cache: a crash keeps a prefix of those writes, in order, and
 *   tears the last one it keeps at a sector boundary (its torn sector holds
 *   zeros or garbage).
 * - A name created, renamed or removed is durable only once its directory is
 *   fsynced: a crash keeps a prefix of each directory's pending changes (a
 *   journalled file system commits them in order).
 * - A write still under way when the power fails (O_DSYNC ones too) may
 *   leave any subset of its sectors on the disk, in any order (the device
 *   reorders them), the others holding what was there, zeros or junk.
 * - Faults on demand: a short write (fewer bytes than asked, as Linux does on
 *   a full disk), ENOSPC, EIO on write, fsync, open, rename and directory
 *   fsync, a misdirected write (firmware puts it a few sectors off, and
 *   reports success), and a latent corrupt sector in data written long ago.
 *
 * Operations are synchronous here; the disk seam adapter adds latency
 * through the scheduler. Every random choice comes from the caller's seeded
 * generator, so a crash replays exactly.
 */
import { posix } from 'node:path';
import type { Disk } from '@ticketing/server';

export const SECTOR = 512;

/** The errors a real disk gives, with the codes node:fs uses. */
export class SimFsError extends Error {
  constructor(
    readonly code: 'ENOENT' | 'EEXIST' | 'ENOSPC' | 'EIO' | 'EBADF' | 'ENOTDIR' | 'EISDIR' | 'ENOTEMPTY',
    message: string,
  ) {
    super(`${code}: ${message}`);
  }
}

interface Inode {
  kind: 'file' | 'dir';
  /** What a reader sees now (page cache). */
  data: Buffer;
  /** What survives a crash for certain. */
  durable: Buffer;
  /** Writes since the last fsync, in order (each already applied to `data`). */
  pending: Array<{ offset: number; bytes: Buffer } | { truncate: number }>;
}

/**
 * A name change in one directory. A rename within a directory is one change, kept or lost whole by a
 * power loss, as a file system's rename is atomic: a prefix that kept its new name without dropping
 * the old one left two names on one file, and the next write to the temporary name emptied the real
 * one (whole-node simulation, priority swarm seed 179: an empty token-high-water.ahead).
 */
type DirOp = { op: 'link'; name: string; inode: Inode } | { op: 'unlink'; name: string } | { op: 'rename'; from: string; to: string; inode: Inode };

interface Handle {
  inode: Inode;
  path: string;
  append: boolean;
  dsync: boolean;
}

export interface OpenFlags {
  create?: boolean;
  /** Fail with EEXIST when the file exists (O_EXCL). */
  exclusive?: boolean;
  truncate?: boolean;
  append?: boolean;
  /** O_DSYNC: each write is durable when it returns. */
  dsync?: boolean;
}

/** Faults to inject on the next matching operations (each fires once). */
export interface PendingFaults {
  shortWrite: number;
  enospc: number;
  eioWrite: number;
  eioSync: number;
  eioOpen: number;
  eioRename: number;
  eioSyncDir: number;
  /** Silent: the write lands some sectors before where it should (damage, not an error). */
  misdirect: number;
}

/** No fault armed. */
export function noFaults(): PendingFaults {
  return { shortWrite: 0, enospc: 0, eioWrite: 0, eioSync: 0, eioOpen: 0, eioRename: 0, eioSyncDir: 0, misdirect: 0 };
}

/** A write issued and not yet returned. */
interface InFlightWrite {
  readonly inode: Inode;
  readonly offset: number;
  readonly bytes: Buffer;
}

export class SimFs {
  /** Visible names: directory path -> (name -> inode). */
  private names = new Map<string, Map<string, Inode>>();
  /** Names as a crash would find them, before pending directory changes. */
  private durableNames = new Map<string, Map<string, Inode>>();
  private dirOps = new Map<string, DirOp[]>();
  private readonly handles = new Map<number, Handle>();
  private nextFd = 3;
  readonly faults: PendingFaults = noFaults();
  /** Writes under way (see beginWrite): a power loss may leave some of their sectors. */
  private readonly inFlight = new Map<number, InFlightWrite>();
  private nextWrite = 1;
  /** Faults that fired (an error or a short write a caller saw): a node that stops itself needs one of these to explain it. */
  faultsFired = 0;
  /** Bytes the disk may still hold; writes beyond it fail with ENOSPC (after a short write). */
  capacity = Number.POSITIVE_INFINITY;
  /**
   * Changes whenever what a power loss would keep may have changed (checks cache on it). Unique
   * across file systems, so the one a power loss leaves never reuses its predecessor's value.
   */
  durableVersion = SimFs.nextVersion();
  private static versions = 0;
  private static nextVersion(): number {
    return ++SimFs.versions;
  }

  constructor() {
    this.names.set('/', new Map());
    this.durableNames.set('/', new Map());
  }

  // --- names ---

  private dirOf(path: string): { dir: string; name: string } {
    const p = posix.normalize(path);
    return { dir: posix.dirname(p), name: posix.basename(p) };
  }

  private entries(dir: string): Map<string, Inode> {
    const d = this.names.get(posix.normalize(dir));
    if (d === undefined) throw new SimFsError('ENOENT', `no such directory ${dir}`);
    return d;
  }

  private lookup(path: string): Inode | undefined {
    const p = posix.normalize(path);
    if (p === '/') return undefined;
    const { dir, name } = this.dirOf(p);
    return this.names.get(dir)?.get(name);
  }

  private change(dir: string, op: DirOp): void {
    const list = this.dirOps.get(dir) ?? [];
    list.push(op);
    this.dirOps.set(dir, list);
    this.durableVersion = SimFs.nextVersion(); // a power loss may keep it
    applyToEntries(this.entries(dir), op);
  }

  exists(path: string): boolean {
    const p = posix.normalize(path);
    return p === '/' || this.lookup(p) !== undefined;
  }

  isDir(path: string): boolean {
    const p = posix.normalize(path);
    return p === '/' || this.lookup(p)?.kind === 'dir';
  }

  mkdir(path: string, recursive = true): void {
    const p = posix.normalize(path);
    if (this.exists(p)) {
      if (this.isDir(p)) return;
      throw new SimFsError('EEXIST', `${p} exists and is a file`);
    }
    const { dir, name } = this.dirOf(p);
    if (!this.exists(dir)) {
      if (!recursive) throw new SimFsError('ENOENT', `no such directory ${dir}`);
      this.mkdir(dir, true);
    }
    const inode = newInode('dir');
    this.change(dir, { op: 'link', name, inode });
    this.names.set(p, new Map());
  }

  list(dir: string): string[] {
    return [...this.entries(dir).keys()].sort();
  }

  rename(from: string, to: string): void {
    this.maybeFail('eioRename', `rename of ${from}`);
    const inode = this.lookup(from);
    if (inode === undefined) throw new SimFsError('ENOENT', `no such file ${from}`);
    const a = this.dirOf(from);
    const b = this.dirOf(to);
    if (a.dir === b.dir) {
      if (a.name !== b.name) this.change(a.dir, { op: 'rename', from: a.name, to: b.name, inode });
      return;
    }
    this.change(b.dir, { op: 'link', name: b.name, inode });
    this.change(a.dir, { op: 'unlink', name: a.name });
  }

  unlink(path: string): void {
    const inode = this.lookup(path);
    if (inode === undefined) throw new SimFsError('ENOENT', `no such file ${path}`);
    if (inode.kind === 'dir' && (this.names.get(posix.normalize(path))?.size ?? 0) > 0) throw new SimFsError('ENOTEMPTY', path);
    const { dir, name } = this.dirOf(path);
    this.change(dir, { op: 'unlink', name });
  }

  /** Makes the directory's name changes durable. */
  fsyncDir(dir: string): void {
    this.maybeFail('eioSyncDir', `fsync of directory ${dir}`);
    const d = posix.normalize(dir);
    if (!this.isDir(d)) throw new SimFsError('ENOTDIR', d);
    const ops = this.dirOps.get(d) ?? [];
    for (const op of ops) applyDirOp(this.durableNames, d, op);
    this.dirOps.delete(d);
    if (ops.length > 0) this.durableVersion = SimFs.nextVersion();
  }

  // --- data ---

  /** Throws EIO if a fault of this kind is armed (and counts it). */
  private maybeFail(kind: 'eioOpen' | 'eioRename' | 'eioSyncDir', what: string): void {
    if (this.faults[kind] <= 0) return;
    this.faults[kind]--;
    this.faultsFired++;
    throw new SimFsError('EIO', what);
  }

  open(path: string, flags: OpenFlags = {}): number {
    this.maybeFail('eioOpen', `open of ${path}`);
    let inode = this.lookup(path);
    if (inode !== undefined && flags.exclusive === true) throw new SimFsError('EEXIST', path);
    if (inode === undefined) {
      if (flags.create !== true) throw new SimFsError('ENOENT', `no such file ${path}`);
      const { dir, name } = this.dirOf(path);
      if (!this.isDir(dir)) throw new SimFsError('ENOENT', `no such directory ${dir}`);
      inode = newInode('file');
      this.change(dir, { op: 'link', name, inode });
    }
    if (inode.kind === 'dir') throw new SimFsError('EISDIR', path);
    if (flags.truncate === true && inode.data.length > 0) {
      inode.data = Buffer.alloc(0);
      inode.pending.push({ truncate: 0 });
    }
    const fd = this.nextFd++;
    this.handles.set(fd, { inode, path: posix.normalize(path), append: flags.append === true, dsync: flags.dsync === true });
    return fd;
  }

  private handle(fd: number): Handle {
    const h = this.handles.get(fd);
    if (h === undefined) throw new SimFsError('EBADF', `fd ${fd}`);
    return h;
  }

  /** Writes at `position` (or the end for an append handle); returns the bytes written, possibly fewer. */
  write(fd: number, bytes: Buffer, position?: number): number {
    const h = this.handle(fd);
    if (this.faults.eioWrite > 0) {
      this.faults.eioWrite--;
      this.faultsFired++;
      throw new SimFsError('EIO', `write to ${h.path}`);
    }
    let n = bytes.length;
    if (this.faults.enospc > 0) {
      this.faults.enospc--;
      this.faultsFired++;
      throw new SimFsError('ENOSPC', `write to ${h.path}`);
    }
    if (this.faults.shortWrite > 0 && n > 1) {
      this.faults.shortWrite--;
      this.faultsFired++;
      n = Math.max(1, Math.floor(n / 2));
    }
    const used = this.usedBytes();
    if (used + n > this.capacity) {
      n = Math.max(0, this.capacity - used);
      this.faultsFired++;
      if (n === 0) throw new SimFsError('ENOSPC', `write to ${h.path}`);
    }
    let offset = h.append || position === undefined ? h.inode.data.length : position;
    if (this.faults.misdirect > 0 && offset >= SECTOR) {
      // Firmware put it a few sectors early and said it went where asked: older data is overwritten.
      this.faults.misdirect--;
      offset = Math.max(0, offset - SECTOR * (1 + (offset % 7)));
    }
    const chunk = Buffer.from(bytes.subarray(0, n));
    h.inode.data = writeAt(h.inode.data, offset, chunk);
    h.inode.pending.push({ offset, bytes: chunk });
    if (h.dsync) this.syncData(h.inode);
    return n;
  }

  /**
   * A write of `bytes` on `fd` was issued; `write` applies it when it
   * returns. Until then a power loss may leave part of it (see crash).
   */
  beginWrite(fd: number, bytes: Buffer, position?: number): number {
    const h = this.handle(fd);
    const id = this.nextWrite++;
    this.inFlight.set(id, { inode: h.inode, offset: h.append || position === undefined ? h.inode.data.length : position, bytes });
    return id;
  }

  /** The write `id` returned (or its process died before it was made: then it never happened). */
  endWrite(id: number): void {
    this.inFlight.delete(id);
  }

  fsync(fd: number): void {
    const h = this.handle(fd);
    if (this.faults.eioSync > 0) {
      this.faults.eioSync--;
      this.faultsFired++;
      // Linux: the failed pages are dropped from the cache and the error reported once.
      h.inode.data = Buffer.from(h.inode.durable);
      h.inode.pending = [];
      throw new SimFsError('EIO', `fsync of ${h.path}`);
    }
    this.syncData(h.inode);
  }

  private syncData(inode: Inode): void {
    if (inode.pending.length === 0) return;
    inode.durable = Buffer.from(inode.data);
    inode.pending = [];
    this.durableVersion = SimFs.nextVersion();
  }

  close(fd: number): void {
    this.handle(fd);
    this.handles.delete(fd);
  }

  size(fdOrPath: number | string): number {
    const inode = typeof fdOrPath === 'number' ? this.handle(fdOrPath).inode : this.lookup(fdOrPath);
    if (inode === undefined) throw new SimFsError('ENOENT', String(fdOrPath));
    return inode.data.length;
  }

  truncate(path: string, length: number): void {
    const inode = this.lookup(path);
    if (inode === undefined) throw new SimFsError('ENOENT', path);
    inode.data = Buffer.from(inode.data.subarray(0, length));
    inode.pending.push({ truncate: length });
  }

  readFile(path: string): Buffer {
    const inode = this.lookup(path);
    if (inode === undefined) throw new SimFsError('ENOENT', `no such file ${path}`);
    if (inode.kind === 'dir') throw new SimFsError('EISDIR', path);
    return Buffer.from(inode.data);
  }

  private usedBytes(): number {
    let n = 0;
    for (const d of this.names.values()) for (const i of d.values()) n += i.data.length;
    return n;
  }

  // --- faults that need no operation ---

  /**
   * A latent sector error: garbage in the sector holding `offset` of `path`,
   * in what is durable and what is cached (it was written long ago).
   */
  corruptSector(path: string, offset: number, random: () => number): void {
    const inode = this.lookup(path);
    if (inode === undefined || inode.data.length === 0) return;
    const start = Math.floor(Math.min(offset, inode.data.length - 1) / SECTOR) * SECTOR;
    for (const buf of [inode.data, inode.durable]) {
      for (let i = start; i < Math.min(start + SECTOR, buf.length); i++) buf[i] = Math.floor(random() * 256);
    }
    this.durableVersion = SimFs.nextVersion();
  }

  /** Every file under `dir` with its size: for choosing what to corrupt. */
  filesUnder(dir: string): Array<{ path: string; size: number }> {
    const out: Array<{ path: string; size: number }> = [];
    const walk = (d: string) => {
      const entries = this.names.get(d);
      if (entries === undefined) return;
      for (const [name, inode] of entries) {
        const p = posix.join(d, name);
        if (inode.kind === 'dir') walk(p);
        else out.push({ path: p, size: inode.data.length });
      }
    };
    walk(posix.normalize(dir));
    return out.sort((a, b) => (a.path < b.path ? -1 : 1));
  }

  /**
   * The machine lost power: returns the file system the next boot finds.
   * Open handles are gone; what was not durable survives only in part.
   */
  crash(random: () => number, dirPrefix?: number): SimFs {
    const next = new SimFs();
    next.capacity = this.capacity;
    // Names: the durable ones plus a prefix of each directory's pending changes.
    const names = cloneNames(this.durableNames);
    for (const [dir, ops] of [...this.dirOps].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
      const keep = dirPrefix === undefined ? Math.floor(random() * (ops.length + 1)) : Math.min(dirPrefix, ops.length);
      for (const op of ops.slice(0, keep)) applyDirOp(names, dir, op);
    }
    // Data: durable bytes plus a prefix of the pending writes, the last one possibly torn.
    const survived = new Map<Inode, Inode>();
    const survive = (inode: Inode): Inode => {
      let copy = survived.get(inode);
      if (copy === undefined) {
        copy = newInode(inode.kind);
        copy.data = crashData(inode, random);
        copy.durable = Buffer.from(copy.data);
        survived.set(inode, copy);
      }
      return copy;
    };
    const reachable = (dir: string): boolean => dir === '/' || (names.get(posix.dirname(dir))?.get(posix.basename(dir))?.kind === 'dir' && reachable(posix.dirname(dir)));
    for (const [dir, entries] of [...names].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
      if (!reachable(dir)) continue;
      const copy = new Map<string, Inode>();
      for (const [name, inode] of [...entries].sort((a, b) => (a[0] < b[0] ? -1 : 1))) copy.set(name, survive(inode));
      next.names.set(dir, copy);
    }
    // A directory listed in its parent always has an entry map.
    for (const [dir, entries] of next.names) {
      for (const [name, inode] of entries) if (inode.kind === 'dir' && !next.names.has(posix.join(dir, name))) next.names.set(posix.join(dir, name), new Map());
    }
    // Writes under way: some sectors of each may have reached the disk, in any order.
    for (const w of this.inFlight.values()) {
      const copy = survived.get(w.inode);
      if (copy === undefined) continue;
      copy.data = tornInFlight(copy.data, w, random);
      copy.durable = Buffer.from(copy.data);
    }
    next.durableNames = cloneNames(next.names);
    return next;
  }

  /**
   * What a power loss may leave of what was made durable: no unsynced data,
   * and each directory's unsynced name changes kept up to every possible
   * prefix (an unsynced unlink may reach the disk while a later rename does
   * not). A thing is durable only if every one of these holds it.
   */
  durableCopies(): SimFs[] {
    const longest = Math.max(0, ...[...this.dirOps.values()].map((ops) => ops.length));
    return Array.from({ length: longest + 1 }, (_, k) => this.crash(() => 0, k));
  }

  /** An operator wiped this directory (a replaced disk): everything under it is gone, durably. */
  wipe(dir: string): void {
    const d = posix.normalize(dir);
    for (const map of [this.names, this.durableNames]) {
      for (const key of [...map.keys()]) if (key === d || key.startsWith(`${d}/`)) map.delete(key);
      map.get(posix.dirname(d))?.delete(posix.basename(d));
    }
    for (const key of [...this.dirOps.keys()]) if (key === d || key.startsWith(`${d}/`)) this.dirOps.delete(key);
    this.durableVersion = SimFs.nextVersion();
  }
}

/**
 * What a power loss leaves of a write that had not returned: nothing (half
 * the time), or each of its sectors independently, so a later sector may be
 * there while an earlier one is not. A gap before a kept sector, past the
 * old end of the file, holds zeros or junk.
 */
function tornInFlight(data: Buffer, w: InFlightWrite, random: () => number): Buffer {
  if (random() < 0.5) return data;
  let out = data;
  const first = Math.floor(w.offset / SECTOR);
  const last = Math.floor((w.offset + w.bytes.length - 1) / SECTOR);
  const junk = random() < 0.5;
  for (let sector = first; sector <= last; sector++) {
    if (random() < 0.5) continue;
    const from = Math.max(w.offset, sector * SECTOR);
    const to = Math.min(w.offset + w.bytes.length, (sector + 1) * SECTOR);
    if (from > out.length) {
      const gap = Buffer.alloc(from - out.length);
      if (junk) for (let i = 0; i < gap.length; i++) gap[i] = Math.floor(random() * 256);
      out = Buffer.concat([out, gap]);
    }
    out = writeAt(out, from, w.bytes.subarray(from - w.offset, to - w.offset));
  }
  return out;
}

function newInode(kind: 'file' | 'dir'): Inode {
  return { kind, data: Buffer.alloc(0), durable: Buffer.alloc(0), pending: [] };
}

function writeAt(data: Buffer, offset: number, bytes: Buffer): Buffer {
  const end = offset + bytes.length;
  const out = end > data.length ? Buffer.concat([data, Buffer.alloc(end - data.length)]) : Buffer.from(data);
  bytes.copy(out, offset);
  return out;
}

function cloneNames(names: Map<string, Map<string, Inode>>): Map<string, Map<string, Inode>> {
  return new Map([...names].map(([d, e]) => [d, new Map(e)]));
}

/**
 * `fs` as the node's storage code reads it, for the checks: listings and
 * contents only, and a data-directory lock that is always granted (a check
 * reads beside the node that holds it, and writes nothing).
 */
export function readOnlyDisk(fs: SimFs): Disk {
  return {
    list: (dir: string) => fs.list(dir),
    readFile: (path: string) => fs.readFile(path),
    lockFile: () => ({ write: () => {}, release: () => {} }),
  } as unknown as Disk;
}

function applyDirOp(names: Map<string, Map<string, Inode>>, dir: string, op: DirOp): void {
  let entries = names.get(dir);
  if (entries === undefined) {
    entries = new Map();
    names.set(dir, entries);
  }
  applyToEntries(entries, op);
  if (op.op !== 'unlink' && op.inode.kind === 'dir') {
    const path = posix.join(dir, op.op === 'link' ? op.name : op.to);
    if (!names.has(path)) names.set(path, new Map());
  }
}

/** Applies `op` to one directory's entries. */
function applyToEntries(entries: Map<string, Inode>, op: DirOp): void {
  if (op.op === 'link') entries.set(op.name, op.inode);
  else if (op.op === 'unlink') entries.delete(op.name);
  else {
    entries.set(op.to, op.inode);
    entries.delete(op.from);
  }
}

/** What a crash leaves of a file: its durable bytes, then some of its pending writes. */
function crashData(inode: Inode, random: () => number): Buffer {
  let data: Buffer = Buffer.from(inode.durable);
  const keep = Math.floor(random() * (inode.pending.length + 1));
  for (let i = 0; i < keep; i++) {
    const w = inode.pending[i]!;
    if ('truncate' in w) {
      data = Buffer.from(data.subarray(0, w.truncate));
      continue;
    }
    let bytes = w.bytes;
    if (i === keep - 1 && random() < 0.5) {
      // Torn: only whole sectors of it reached the disk, and the next one holds junk.
      const first = Math.floor(w.offset / SECTOR) * SECTOR;
      const sectors = Math.ceil((w.offset + bytes.length - first) / SECTOR);
      const cut = first + Math.floor(random() * sectors) * SECTOR;
      const kept = Math.max(0, cut - w.offset);
      const junkEnd = Math.min(w.offset + bytes.length, Math.max(cut, w.offset) + SECTOR) - w.offset;
      const torn = Buffer.from(bytes.subarray(0, junkEnd));
      const zeros = random() < 0.5;
      for (let j = kept; j < junkEnd; j++) torn[j] = zeros ? 0 : Math.floor(random() * 256);
      bytes = torn;
    }
    data = writeAt(data, w.offset, bytes);
  }
  return data;
}
