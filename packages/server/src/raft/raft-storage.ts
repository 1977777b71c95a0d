/**
 * Durable Raft state in `<data-dir>/raft`: a write-ahead log of hard state and
 * entries, and snapshots of the lock table.
 *
 * WAL records are `[u32 length][u32 crc32][payload]`. Payloads:
 *   H <term> <vote|-> <commit>     hard state
 *   E <index> <term> <command>     an entry (an index at or below the last one replaces the tail)
 *   T <index>                      the log from <index> on was discarded
 *   S <index> <term>               a snapshot through <index> was installed
 * One write and one fsync per Ready (group commit: the runtime batches
 * everything proposed while the previous fsync ran). On recovery a torn or
 * corrupt tail (bad length or checksum) is cut off; corruption before the
 * last record of the last segment stops the start instead of guessing.
 *
 * Snapshots are files `snapshot-<index>.snap`: a JSON header line, then one
 * `key token lease-ms` line per held lock; the header carries the body's
 * checksum. Written to a temporary file, fsynced, renamed, and the directory
 * fsynced. After a snapshot the WAL is rewritten from it: a new segment with
 * the hard state and the entries after the snapshot, then older segments go.
 */
import { join } from 'node:path';
import { CorruptStorage, StorageError } from '../errors.js';
import type { Disk, DiskFile } from '../seams/disk.js';
import type { LockTableSnapshot } from '../state-machine/lock-table.js';
import { crc32 } from './crc32.js';
import type { RaftRecovered } from './raft-core.js';
import type { Entry, HardState, SnapshotMeta } from './types.js';

const SEGMENT_BYTES = 64 * 1024 * 1024;
const HEADER = 8;


export interface StoredSnapshot {
  readonly meta: SnapshotMeta;
  readonly table: LockTableSnapshot;
  /** The file's text: what a leader sends to a follower that needs it. */
  readonly text: string;
}

export interface Recovery {
  readonly state: RaftRecovered;
  readonly snapshot: StoredSnapshot | undefined;
}

function segmentName(seq: number): string {
  return `wal-${String(seq).padStart(10, '0')}.log`;
}

function encodeRecord(payload: string): Buffer {
  const body = Buffer.from(payload, 'utf8');
  const out = Buffer.allocUnsafe(HEADER + body.length);
  out.writeUInt32LE(body.length, 0);
  out.writeUInt32LE(crc32(body), 4);
  body.copy(out, HEADER);
  return out;
}

/** Text form of a snapshot (file and wire). */
export function snapshotText(meta: SnapshotMeta, table: LockTableSnapshot): string {
  let body = '';
  for (const [key, token, leaseMs] of table.locks) body += `${key} ${token} ${leaseMs}\n`;
  const header = JSON.stringify({ index: meta.index, term: meta.term, nextToken: table.nextToken, count: table.locks.length, crc: crc32(Buffer.from(body, 'utf8')) });
  return `${header}\n${body}`;
}

export function parseSnapshotText(text: string): StoredSnapshot {
  const nl = text.indexOf('\n');
  const header = JSON.parse(text.slice(0, nl)) as { index: number; term: number; nextToken: string; count: number; crc: number };
  const body = text.slice(nl + 1);
  if (crc32(Buffer.from(body, 'utf8')) !== header.crc) throw new CorruptStorage('snapshot checksum mismatch');
  const locks: Array<[string, string, number]> = [];
  for (const line of body.split('\n')) {
    if (line === '') continue;
    const [key, token, lease] = line.split(' ');
    locks.push([key!, token!, Number(lease)]);
  }
  if (locks.length !== header.count) throw new CorruptStorage('snapshot lock count mismatch');
  return { meta: { index: header.index, term: header.term }, table: { nextToken: header.nextToken, locks }, text };
}

export class RaftStorage {
  /** The current WAL segment: appended, every write durable when it returns (O_DSYNC; group commit does the batching). */
  private fd: DiskFile | undefined;
  private segment = 0;
  private segmentBytes = 0;
  /** Writes run one after another (a snapshot switches segments under the appends). */
  private chain: Promise<unknown> = Promise.resolve();

  private async serial<T>(work: () => Promise<T>): Promise<T> {
    const next = this.chain.then(work, work);
    this.chain = next.catch(() => {});
    return next;
  }

  private constructor(
    private readonly disk: Disk,
    readonly dir: string,
  ) {}

  static async open(disk: Disk, dataDir: string): Promise<{ storage: RaftStorage; recovery: Recovery }> {
    const dir = join(dataDir, 'raft');
    disk.mkdir(dir);
    const storage = new RaftStorage(disk, dir);
    const recovery = storage.recover();
    storage.segment = Math.max(storage.segment, 1);
    const path = join(dir, segmentName(storage.segment));
    storage.fd = await disk.open(path, 'append-dsync');
    storage.segmentBytes = disk.size(path);
    return { storage, recovery };
  }

  private segments(): number[] {
    return this.disk
      .list(this.dir)
      .map((f) => /^wal-(\d+)\.log$/.exec(f))
      .filter((m) => m !== null)
      .map((m) => Number(m[1]))
      .sort((a, b) => a - b);
  }

  private loadSnapshot(): StoredSnapshot | undefined {
    const files = this.disk
      .list(this.dir)
      .map((f) => /^snapshot-(\d+)\.snap$/.exec(f))
      .filter((m) => m !== null)
      .sort((a, b) => Number(b[1]) - Number(a[1]));
    for (const m of files) {
      try {
        return parseSnapshotText(this.disk.readFile(join(this.dir, m[0])).toString('utf8'));
      } catch {
        // A damaged newest snapshot: fall back to the one before it (the WAL still covers it).
      }
    }
    return undefined;
  }

  private recover(): Recovery {
    const snapshot = this.loadSnapshot();
    let hard: HardState = { term: 0, vote: undefined, commit: 0 };
    let snap: SnapshotMeta = snapshot?.meta ?? { index: 0, term: 0 };
    let entries: Entry[] = [];
    const segs = this.segments();
    segs.forEach((seq, i) => {
      const path = join(this.dir, segmentName(seq));
      const buf = this.disk.readFile(path);
      let pos = 0;
      while (pos < buf.length) {
        const bad = pos + HEADER > buf.length || pos + HEADER + buf.readUInt32LE(pos) > buf.length;
        const len = bad ? 0 : buf.readUInt32LE(pos);
        const body = bad ? undefined : buf.subarray(pos + HEADER, pos + HEADER + len);
        if (body === undefined || crc32(body) !== buf.readUInt32LE(pos + 4)) {
          if (i !== segs.length - 1) throw new CorruptStorage(`corrupt record in ${path} at byte ${pos}, before the last segment`);
          this.disk.truncate(path, pos); // a torn tail: the write never completed, so it was never acknowledged
          break;
        }
        pos += HEADER + len;
        const p = body.toString('utf8');
        const f = p.split(' ');
        switch (f[0]) {
          case 'H':
            hard = { term: Number(f[1]), vote: f[2] === '-' ? undefined : f[2], commit: Number(f[3]) };
            break;
          case 'E': {
            const index = Number(f[1]);
            if (index <= snap.index) break;
            entries = entries.filter((e) => e.index < index);
            const expected = snap.index + entries.length + 1;
            if (index !== expected) throw new CorruptStorage(`log gap in ${path}: entry ${index} where ${expected} was expected`);
            entries.push({ index, term: Number(f[2]), command: p.slice(p.indexOf(' ', p.indexOf(' ', 2) + 1) + 1) });
            break;
          }
          case 'T': {
            const from = Number(f[1]);
            entries = entries.filter((e) => e.index < from);
            break;
          }
          case 'S': {
            const index = Number(f[1]);
            if (index > snap.index) {
              snap = { index, term: Number(f[2]) };
              entries = entries.filter((e) => e.index > index);
            }
            break;
          }
          default:
            throw new CorruptStorage(`unknown record in ${path}: ${p.slice(0, 20)}`);
        }
      }
    });
    this.segment = segs.at(-1) ?? 0;
    if (snapshot !== undefined && snapshot.meta.index < snap.index) {
      throw new CorruptStorage(`the WAL says a snapshot through ${snap.index} was installed, but the newest readable one ends at ${snapshot.meta.index}`);
    }
    return { state: { hardState: hard, snapshot: snap, entries }, snapshot };
  }

  /** Appends one batch durably: one write, one fsync. */
  async save(batch: { hardState?: HardState; truncateFrom?: number; entries: readonly Entry[]; installed?: SnapshotMeta }): Promise<void> {
    return this.serial(async () => this.append(batch));
  }

  private async append(batch: { hardState?: HardState; truncateFrom?: number; entries: readonly Entry[]; installed?: SnapshotMeta }): Promise<void> {
    const parts: Buffer[] = [];
    if (batch.installed !== undefined) parts.push(encodeRecord(`S ${batch.installed.index} ${batch.installed.term}`));
    if (batch.truncateFrom !== undefined) parts.push(encodeRecord(`T ${batch.truncateFrom}`));
    for (const e of batch.entries) parts.push(encodeRecord(`E ${e.index} ${e.term} ${e.command}`));
    if (batch.hardState !== undefined) {
      const h = batch.hardState;
      parts.push(encodeRecord(`H ${h.term} ${h.vote ?? '-'} ${h.commit}`));
    }
    if (parts.length === 0) return;
    const data = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
    // O_DSYNC: the write returns once the data is on stable storage (one trip to the thread pool, not two).
    const written = await this.fd!.write(data);
    this.segmentBytes += written;
    if (written !== data.length) throw new StorageError(`raft: short WAL write (${written} of ${data.length} bytes) in ${this.dir}`);
  }

  /**
   * Writes `snapshot` durably, then rewrites the WAL from it: a new segment
   * with `hard` and `tail` (the entries after the snapshot), then the old
   * segments and snapshots are removed.
   */
  async saveSnapshot(snapshot: StoredSnapshot, hard: HardState, tail: readonly Entry[]): Promise<void> {
    return this.serial(async () => this.writeSnapshot(snapshot, hard, tail));
  }

  private async writeSnapshot(snapshot: StoredSnapshot, hard: HardState, tail: readonly Entry[]): Promise<void> {
    const name = `snapshot-${String(snapshot.meta.index).padStart(12, '0')}.snap`;
    const tmp = join(this.dir, `${name}.tmp`);
    const f = await this.disk.open(tmp, 'write');
    try {
      await f.write(Buffer.from(snapshot.text, 'utf8'));
      await f.sync();
    } finally {
      await f.close();
    }
    await this.disk.rename(tmp, join(this.dir, name));
    await this.disk.syncDir(this.dir);
    // A fresh segment that stands on its own with the snapshot.
    const old = this.segments();
    await this.fd!.close();
    this.segment++;
    this.fd = await this.disk.open(join(this.dir, segmentName(this.segment)), 'append-dsync');
    this.segmentBytes = 0;
    await this.append({ hardState: hard, entries: tail, installed: snapshot.meta });
    await this.disk.syncDir(this.dir);
    for (const seq of old) await this.disk.unlink(join(this.dir, segmentName(seq)));
    for (const file of this.disk.list(this.dir)) {
      const m = /^snapshot-(\d+)\.snap$/.exec(file);
      if (m !== null && Number(m[1]) < snapshot.meta.index) await this.disk.unlink(join(this.dir, file));
    }
  }

  /** True when the current segment is large: the runtime should take a snapshot soon. */
  get segmentFull(): boolean {
    return this.segmentBytes > SEGMENT_BYTES;
  }

  async close(): Promise<void> {
    await this.serial(async () => {
      await this.fd?.close();
      this.fd = undefined;
    });
  }

  /** For tests: total bytes of WAL on disk. */
  walBytes(): number {
    return this.segments().reduce((n, s) => n + this.disk.size(join(this.dir, segmentName(s))), 0);
  }
}
