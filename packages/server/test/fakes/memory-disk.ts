/**
 * An in-memory disk for tests: files are buffers by path, directories exist
 * once made. Every write is "durable" at once (no crash model: the simulator
 * adds one). Errors carry Node's codes (ENOENT, EEXIST), as the Disk seam says.
 */
import { dirname } from 'node:path';
import type { Disk, DiskFile, DiskFileSync, DiskLock, OpenMode } from '../../src/seams/disk.js';

function fail(code: string, path: string): never {
  throw Object.assign(new Error(`${code}: ${path}`), { code });
}

export class MemoryDisk implements Disk {
  readonly files = new Map<string, Buffer>();
  private readonly dirs = new Set<string>(['/']);
  /** Paths locked with lockFile (one process: a second lock on a path is refused, as an OFD lock is). */
  private readonly locked = new Set<string>();

  mkdir(dir: string): void {
    for (let d = dir; !this.dirs.has(d); d = dirname(d)) this.dirs.add(d);
  }

  list(dir: string): string[] {
    if (!this.dirs.has(dir)) fail('ENOENT', dir);
    return [...this.files.keys()].filter((p) => dirname(p) === dir).map((p) => p.slice(dir.length + 1));
  }

  readFile(path: string): Buffer {
    return Buffer.from(this.files.get(path) ?? fail('ENOENT', path));
  }

  size(path: string): number {
    return (this.files.get(path) ?? fail('ENOENT', path)).length;
  }

  truncate(path: string, size: number): void {
    this.files.set(path, this.readFile(path).subarray(0, size));
  }

  openSync(path: string, mode: OpenMode): DiskFileSync {
    if (!this.dirs.has(dirname(path))) fail('ENOENT', path);
    if (mode === 'create-exclusive' && this.files.has(path)) fail('EEXIST', path);
    if (mode !== 'append-dsync' || !this.files.has(path)) this.files.set(path, Buffer.alloc(0));
    return {
      write: (data) => {
        this.files.set(path, Buffer.concat([this.files.get(path) ?? Buffer.alloc(0), data]));
        return data.length;
      },
      sync: () => {},
      close: () => {},
    };
  }

  async open(path: string, mode: OpenMode): Promise<DiskFile> {
    const f = this.openSync(path, mode);
    return Promise.resolve({
      write: async (data: Uint8Array) => Promise.resolve(f.write(data)),
      sync: async () => Promise.resolve(),
      close: async () => Promise.resolve(),
    });
  }

  renameSync(from: string, to: string): void {
    this.files.set(to, this.files.get(from) ?? fail('ENOENT', from));
    this.files.delete(from);
  }

  async rename(from: string, to: string): Promise<void> {
    this.renameSync(from, to);
    return Promise.resolve();
  }

  syncDirSync(_dir: string): void {}

  async syncDir(_dir: string): Promise<void> {
    return Promise.resolve();
  }

  unlinkSync(path: string): void {
    this.files.delete(path);
  }

  async unlink(path: string): Promise<void> {
    this.unlinkSync(path);
    return Promise.resolve();
  }

  lockFile(path: string): DiskLock | undefined {
    if (this.locked.has(path)) return undefined;
    this.locked.add(path);
    let held = true;
    return {
      write: (text) => void this.files.set(path, Buffer.from(text)),
      release: () => {
        if (held) this.locked.delete(path);
        held = false;
      },
    };
  }

  /** The process holding the locks died: the kernel drops them. */
  dropLocks(): void {
    this.locked.clear();
  }
}
