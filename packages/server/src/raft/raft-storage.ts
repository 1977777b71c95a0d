/**
 * Durable Raft state in `<data-dir>/raft`: a write-ahead log of hard state and
 * entries, and snapshots of the lock table.
 *
 * WAL records are `[u32 length][u32 crc32][payload]`. Payloads:
 *   V 2                            the segment's format (its first record; segments without it are version 1)
 *   H <term> <vote|-> <commit> [m|j|u]   hard state (membership: member, joining, unknown; see types.ts)
 *   E <index> <term> <command>     an entry (an index at or below the last one with another term replaces the tail)
 *   T <index>                      the log from <index> on was discarded
 *   S <index> <term>               a snapshot through <index> was installed
 *   C <bytes>                      the end of one write: the <bytes> before this record were written with it
 * One write per Ready, durable when it returns (O_DSYNC; group commit: the
 * runtime batches everything proposed while the previous write ran). Each
 * write ends with its C record: its records count only once it is there.
 *
 * Recovery trusts nothing it cannot check. A record is valid when its length
 * is plausible, its checksum matches and its payload parses. The only damage
 * it repairs is the last write of the last segment torn by a crash (never
 * acknowledged, since it never returned): whatever follows the last complete
 * write, provided no complete write follows the damage. A torn write keeps
 * any subset of its sectors, in any order, so a valid record may follow the
 * damage inside it; the C records tell one write from the next. Anything else
 * (damage with a complete write after it, or in an older segment) is
 * corruption of acknowledged state: the start stops with the file and offset.
 * Version 1 segments (no V, no C) are read as before: each record counts at
 * once, and only invalid bytes with no valid record after them are cut; the
 * first start on them moves to a version 2 segment.
 *
 * Snapshots are files `snapshot-<index>.snap`: a JSON header line, then one
 * `key token lease-ms` line per held lock; the checksum covers the header's
 * fields and the body. Written to a temporary file, fsynced, renamed, and the
 * directory fsynced. After a snapshot the WAL is rewritten from it: a new
 * segment with the hard state and the entries after the snapshot, written
 * whole under a temporary name and renamed, durable before the older
 * segments go.
 *
 * After any failed write the storage refuses every later operation: what a
 * failed write left on disk is unknown, so the node must stop (and recover
 * from what is durable) rather than write after a hole.
 */
import { decodeCommand } from '../state-machine/command-codec.js';
import { checkCommand } from '../state-machine/command-check.js';
import { join } from 'node:path';
import { CommandFormatError, CorruptStorage, StorageError, UnsupportedFormat } from '../errors.js';
import type { Disk, DiskFile } from '../seams/disk.js';
import { mkdirDurable, replaceFileDurably, writeAll } from '../storage/durable-dir.js';
import type { LockTableSnapshot } from '../state-machine/lock-table.js';
import { crc32 } from './crc32.js';
import { decodeConfiguration, encodeConfiguration, isConfigurationCommand } from './configuration.js';
import type { RaftRecovered } from './raft-core.js';
import type { Entry, HardState, SnapshotMeta } from './types.js';

const SEGMENT_BYTES = 64 * 1024 * 1024;
const HEADER = 8;
/** No record is larger (a batch of entries is many records): a larger length is damage, not data. */
const MAX_RECORD = 1024 * 1024;


export interface StoredSnapshot {
  readonly meta: SnapshotMeta;
  readonly table: LockTableSnapshot;
  /** The file's text: what a leader sends to a follower that needs it. */
  readonly text: string;
}

export interface Recovery {
  readonly state: RaftRecovered;
  readonly snapshot: StoredSnapshot | undefined;
  /**
   * No WAL segment existed: a new node, or a replaced disk. (A segment that
   * exists, even empty, proves this disk has been this node's all along: a
   * vote is written before it is sent, so nothing was forgotten.)
   */
  readonly fresh: boolean;
  /** The last write of the last segment was torn (never completed): recovery cut it. */
  readonly tornWrite: boolean;
}

function segmentName(seq: number): string {
  return `wal-${String(seq).padStart(10, '0')}.log`;
}

function snapshotName(index: number): string {
  return `snapshot-${String(index).padStart(12, '0')}.snap`;
}

function encodeRecord(payload: string): Buffer {
  const body = Buffer.from(payload, 'utf8');
  const out = Buffer.allocUnsafe(HEADER + body.length);
  out.writeUInt32LE(body.length, 0);
  out.writeUInt32LE(crc32(body), 4);
  body.copy(out, HEADER);
  return out;
}

/** What one WAL write carries. */
interface Batch {
  readonly hardState?: HardState;
  readonly truncateFrom?: number;
  readonly entries: readonly Entry[];
  readonly installed?: SnapshotMeta;
}

/** The WAL format this version writes (the V record that starts each segment). */
const WAL_VERSION = 2;

/**
 * A batch as WAL records, in the order recovery applies them, closed by its
 * C record (empty when there is nothing to write). `first`: the first write
 * of a new segment, which starts with the format's V record.
 */
function encodeBatch(batch: Batch, first = false): Buffer {
  const parts: Buffer[] = [];
  if (first) parts.push(encodeRecord(`V ${WAL_VERSION}`));
  if (batch.installed !== undefined) parts.push(encodeRecord(`S ${batch.installed.index} ${batch.installed.term}`));
  if (batch.truncateFrom !== undefined) parts.push(encodeRecord(`T ${batch.truncateFrom}`));
  for (const e of batch.entries) parts.push(encodeRecord(`E ${e.index} ${e.term} ${e.command}`));
  if (batch.hardState !== undefined) {
    const h = batch.hardState;
    parts.push(encodeRecord(`H ${h.term} ${h.vote ?? '-'} ${h.commit} ${(h.membership ?? 'member')[0]}`));
  }
  if (parts.length === 0) return Buffer.alloc(0);
  const body = Buffer.concat(parts);
  return Buffer.concat([body, encodeRecord(`C ${body.length}`)]);
}

/** Text form of a snapshot (file and wire). */
/** One `key token lease-ms [~owner]` line per held lock: a snapshot's body, and a backup's (storage/backup.ts). */
export function lockLines(locks: LockTableSnapshot['locks']): string {
  let body = '';
  for (const [key, token, leaseMs, owner] of locks) body += owner === undefined ? `${key} ${token} ${leaseMs}\n` : `${key} ${token} ${leaseMs} ~${owner}\n`;
  return body;
}

export function snapshotText(meta: SnapshotMeta, table: LockTableSnapshot): string {
  const body = lockLines(table.locks);
  const fields = { v: meta.members === undefined ? 2 : 3, index: meta.index, term: meta.term, nextToken: table.nextToken, count: table.locks.length, ...(meta.members === undefined ? {} : { members: meta.members }) };
  const header = JSON.stringify({ ...fields, crc: snapshotChecksum(fields, body) });
  return `${header}\n${body}`;
}

interface SnapshotHeader {
  v?: number;
  index: number;
  term: number;
  nextToken: string;
  count: number;
  /** Version 3: the membership in effect at `index` (raft/configuration.ts). */
  members?: string;
  crc: number;
}

/** The snapshot format this release writes with a membership (3), and the newest it reads. */
const SNAPSHOT_VERSION = 3;

/** Version 2 covers the header's fields too (index, term, next token, count), not only the body; version 3 its membership as well. */
function snapshotChecksum(h: Omit<SnapshotHeader, 'crc'>, body: string): number {
  const covered =
    h.v === 3 ? `${h.index} ${h.term} ${h.nextToken} ${h.count} ${h.members}\n${body}` : h.v === 2 ? `${h.index} ${h.term} ${h.nextToken} ${h.count}\n${body}` : body;
  return crc32(Buffer.from(covered, 'utf8'));
}

export function parseSnapshotText(text: string): StoredSnapshot {
  const nl = text.indexOf('\n');
  if (nl < 0) throw new CorruptStorage('snapshot has no header line');
  let header: SnapshotHeader;
  try {
    header = JSON.parse(text.slice(0, nl)) as SnapshotHeader;
  } catch {
    throw new CorruptStorage('snapshot header is not valid JSON');
  }
  // A newer format is refused by name: its checksum covers fields this release does not know of.
  if (typeof header.v === 'number' && header.v > SNAPSHOT_VERSION) {
    throw new UnsupportedFormat(`snapshot has format ${header.v}, newer than this release reads (${SNAPSHOT_VERSION}): a newer Ticketing wrote it`);
  }
  const body = text.slice(nl + 1);
  if (snapshotChecksum(header, body) !== header.crc) throw new CorruptStorage('snapshot checksum mismatch');
  const locks: Array<[string, string, number, string?]> = [];
  for (const line of body.split('\n')) {
    if (line === '') continue;
    const [key, token, lease, owner] = line.split(' ');
    locks.push(owner?.startsWith('~') === true ? [key!, token!, Number(lease), owner.slice(1)] : [key!, token!, Number(lease)]);
  }
  if (locks.length !== header.count) throw new CorruptStorage('snapshot lock count mismatch');
  let members: string | undefined;
  if (header.v === 3) {
    try {
      members = encodeConfiguration(decodeConfiguration(String(header.members)));
    } catch (err) {
      throw new CorruptStorage(`snapshot membership: ${(err as Error).message}`, { cause: err });
    }
  }
  const meta = members === undefined ? { index: header.index, term: header.term } : { index: header.index, term: header.term, members };
  return { meta, table: { nextToken: header.nextToken, locks }, text };
}

/** A record read from a segment: its payload and where the next one starts. */
interface RawRecord {
  readonly payload: string;
  readonly end: number;
}

/** The record at `pos`, or undefined when there is no valid one there. */
function readRecord(buf: Buffer, pos: number): RawRecord | undefined {
  if (pos + HEADER > buf.length) return undefined;
  const len = buf.readUInt32LE(pos);
  // Empty payloads never occur (zeroed bytes would otherwise pass: crc32 of nothing is 0).
  if (len === 0 || len > MAX_RECORD || pos + HEADER + len > buf.length) return undefined;
  const body = buf.subarray(pos + HEADER, pos + HEADER + len);
  if (crc32(body) !== buf.readUInt32LE(pos + 4)) return undefined;
  const payload = body.toString('utf8');
  if (!RECORD_SHAPE.test(payload)) return undefined;
  return { payload, end: pos + HEADER + len };
}

/** What each record type looks like; the fields are checked again when applied. */
const RECORD_SHAPE = /^(H \d+ \S+ \d+( [mju])?|E \d+ \d+ [^\n]*|T \d+|S \d+ \d+|C \d+|V \d+)$/;
/** The first bytes of each record type's payload (a cheap filter when searching damaged bytes). */
const RECORD_TYPES = new Set([0x48, 0x45, 0x54, 0x53, 0x43, 0x56]);
const MEMBERSHIP = { m: 'member', j: 'joining', u: 'unknown' } as const;

/**
 * The first valid record at or after `from` (of type `type` when given), if
 * any. A record cannot hide inside another's payload: its length field holds
 * bytes below 0x20, which no payload has.
 */
function findValidRecord(buf: Buffer, from: number, type?: string): { pos: number; record: RawRecord } | undefined {
  const want = type?.charCodeAt(0);
  for (let pos = from; pos + HEADER < buf.length; pos++) {
    // Cheap filter first: a record's payload starts with its type and a space.
    const t = buf[pos + HEADER]!;
    if (!(want === undefined ? RECORD_TYPES.has(t) : t === want) || buf[pos + HEADER + 1] !== 0x20) continue;
    const record = readRecord(buf, pos);
    if (record !== undefined) return { pos, record };
  }
  return undefined;
}

/**
 * Where a damaged version 2 segment may be cut: the start of the write the
 * damage at `pos` is in (`writeStart`, where the last complete write ended),
 * when that write is the segment's last, torn by a crash. Undefined when a
 * complete write follows the damage: that is acknowledged state.
 */
function tornWriteCut(buf: Buffer, pos: number, writeStart: number): number | undefined {
  const closing = findValidRecord(buf, pos + 1, 'C');
  if (closing === undefined) return writeStart; // no write after it completed: this one was cut short
  const bytes = Number(closing.record.payload.slice(2));
  // The damaged write's own end survived: nothing valid may come after it.
  if (closing.pos - bytes === writeStart && findValidRecord(buf, closing.record.end) === undefined) return writeStart;
  return undefined;
}

/**
 * The log as the WAL's records rebuild it, with the same rules the core
 * follows: an entry at or below the last index replaces the tail, `T` cuts
 * it, and `S` (a snapshot installed) keeps the entries after the snapshot
 * only if the log holds the snapshot's last entry with its term (otherwise
 * the whole log was replaced, as RaftCore does on InstallSnapshot).
 */
class RecoveredLog {
  hard: HardState = { term: 0, vote: undefined, commit: 0 };
  snap: SnapshotMeta = { index: 0, term: 0 };
  entries: Entry[] = [];

  apply(payload: string, path: string, pos: number): void {
    const f = payload.split(' ');
    switch (f[0]) {
      case 'H':
        this.hard = { term: num(f[1]), vote: f[2] === '-' ? undefined : f[2], commit: num(f[3]), membership: MEMBERSHIP[(f[4] ?? 'm') as keyof typeof MEMBERSHIP] };
        return;
      case 'E': {
        const index = num(f[1]);
        const term = num(f[2]);
        if (index <= this.snap.index) return;
        // The same index with the same term is the same entry (log matching): kept, never a new
        // tail. A rewrite of entries already on disk, torn by a crash, would otherwise cut off the
        // ones after it, durable and acknowledged (issue 27, D-1).
        if (this.entries[index - this.snap.index - 1]?.term === term) return;
        this.entries.length = Math.max(0, Math.min(this.entries.length, index - this.snap.index - 1));
        const expected = this.snap.index + this.entries.length + 1;
        if (index !== expected) throw new CorruptStorage(`log gap in ${path} at byte ${pos}: entry ${index} where ${expected} was expected`);
        const command = payload.slice(f[0].length + f[1]!.length + f[2]!.length + 3);
        // Decoded now, not when applied: a bad command must stop the start with this line, not crash every restart later.
        try {
          if (isConfigurationCommand(command)) decodeConfiguration(command);
          else checkCommand(decodeCommand(command));
        } catch (err) {
          throw new CommandFormatError(`entry ${index} holds no valid lock command (${(err as Error).message})`, { cause: err });
        }
        this.entries.push({ index, term, command });
        return;
      }
      case 'T': {
        const from = num(f[1]);
        this.entries.length = Math.max(0, Math.min(this.entries.length, from - this.snap.index - 1));
        return;
      }
      case 'S':
        this.installSnapshot({ index: num(f[1]), term: num(f[2]) });
        return;
    }
  }

  installSnapshot(meta: SnapshotMeta): void {
    if (meta.index <= this.snap.index) return;
    const at = this.entries[meta.index - this.snap.index - 1];
    this.entries = at !== undefined && at.term === meta.term ? this.entries.slice(meta.index - this.snap.index) : [];
    this.snap = meta;
  }
}

function num(field: string | undefined): number {
  const n = Number(field);
  if (field === undefined || !Number.isSafeInteger(n) || n < 0) throw new CorruptStorage(`bad number ${JSON.stringify(field)}`);
  return n;
}

export class RaftStorage {
  /** The current WAL segment: appended, every write durable when it returns (O_DSYNC; group commit does the batching). */
  private fd: DiskFile | undefined;
  private segment = 0;
  private segmentBytes = 0;
  /** Synced WAL writes (one per batch: group commit) and the entries they carried, since the start (/metrics). */
  readonly writes = { syncedWrites: 0, entries: 0 };
  /** Writes run one after another (a snapshot switches segments under the appends). */
  private chain: Promise<unknown> = Promise.resolve();
  /** The first write that failed: every later operation fails with it (see the file's comment). */
  private failed: Error | undefined;
  /** Recovery found a snapshot the WAL does not record (a crash before its new segment): open() finishes it. */
  private interruptedSnapshot = false;
  /** The last segment is of this version's format (false: version 1, or none yet). */
  private lastFramed = false;

  private async serial<T>(work: () => Promise<T>): Promise<T> {
    const guarded = async () => {
      if (this.failed !== undefined) throw new StorageError(`raft storage failed earlier: ${this.failed.message}`, { cause: this.failed });
      try {
        return await work();
      } catch (err) {
        this.failed ??= err as Error;
        throw err;
      }
    };
    const next = this.chain.then(guarded, guarded);
    this.chain = next.catch(() => {});
    return next;
  }

  private constructor(
    private readonly disk: Disk,
    readonly dir: string,
  ) {}

  /** `joining`: this node replaces a lost member (--raft-join); recorded at once on a new disk. */
  static async open(disk: Disk, dataDir: string, joining = false): Promise<{ storage: RaftStorage; recovery: Recovery }> {
    const dir = join(dataDir, 'raft');
    mkdirDurable(disk, dir);
    const storage = new RaftStorage(disk, dir);
    const recovery = storage.recover();
    const created = storage.segment === 0;
    storage.segment = Math.max(storage.segment, 1);
    const path = join(dir, segmentName(storage.segment));
    storage.fd = await disk.open(path, 'append-dsync');
    storage.segmentBytes = disk.size(path);
    // A new segment's name must be durable before anything written in it is acknowledged. So must
    // the names recovery just read: a crash may have come between creating a segment (or renaming
    // a snapshot) and the directory fsync that follows, and what this node acknowledges from now on
    // rests on them (whole-node simulation, seed 212273: a power loss after such a restart lost a
    // segment of acknowledged entries).
    await disk.syncDir(dir);
    if (storage.interruptedSnapshot || (!storage.lastFramed && storage.segmentBytes > 0)) {
      // Entries appended now would follow, in the old segment, entries that end below the
      // snapshot: a gap the next recovery refuses (whole-node simulation, seed 450542). Finish the
      // switch the crash interrupted: a new segment that starts from the snapshot. A version 1
      // segment is moved to this version's format the same way (its writes cannot be told apart).
      const { hardState, entries, snapshot } = recovery.state;
      await storage.serial(async () => storage.startSegment({ membership: 'member', ...hardState }, entries, snapshot));
    }
    if (created) {
      // The disk records at once that it started empty (types.ts, Membership): a restart before
      // anything else is written must not take it for a disk that was always this node's.
      await storage.save({ hardState: { ...recovery.state.hardState, membership: joining ? 'joining' : 'unknown' }, entries: [] });
    }
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
      const path = join(this.dir, m[0]);
      try {
        return parseSnapshotText(this.disk.readFile(path).toString('utf8'));
      } catch (err) {
        // A newer format is no damage: skipping it would start this node on an older state.
        if (err instanceof UnsupportedFormat) throw new UnsupportedFormat(`${path}: ${err.message}; run that release on this data directory`);
        // A damaged newest snapshot: fall back to the one before it (the WAL still covers it;
        // if it does not, recovery below says so).
      }
    }
    return undefined;
  }

  /**
   * The Raft state of a data directory restored from a backup (storage/backup.ts):
   * `table` as a snapshot at `meta`, and a first WAL segment that installed it,
   * committed there. The disk is a member's (it votes): the new cluster starts
   * from it. `dataDir` must hold no Raft state yet.
   */
  static async seed(disk: Disk, dataDir: string, meta: SnapshotMeta, table: LockTableSnapshot): Promise<void> {
    const dir = join(dataDir, 'raft');
    mkdirDurable(disk, dir);
    if (disk.list(dir).length > 0) throw new StorageError(`${dir} already holds Raft state`);
    await replaceFileDurably(disk, join(dir, snapshotName(meta.index)), Buffer.from(snapshotText(meta, table), 'utf8'));
    const hardState: HardState = { term: meta.term, vote: undefined, commit: meta.index, membership: 'member' };
    await replaceFileDurably(disk, join(dir, segmentName(1)), encodeBatch({ installed: meta, hardState, entries: [] }, true), `the raft WAL in ${dir}`);
  }

  /**
   * What recovery would find on `disk` now, without changing anything (a torn
   * tail is left in place): for the simulator, which checks what is durable.
   */
  static inspect(disk: Disk, dataDir: string): Recovery {
    return new RaftStorage(disk, join(dataDir, 'raft')).recover(false);
  }

  private recover(repair = true): Recovery {
    // Files a crash left half-written (a snapshot, a new segment): never renamed into place, so never part of the state.
    if (repair) for (const f of this.disk.list(this.dir).filter((name) => name.endsWith('.tmp'))) this.disk.unlinkSync(join(this.dir, f));
    const snapshot = this.loadSnapshot();
    const log = new RecoveredLog();
    const segs = this.segments();
    let tornWrite = false;
    segs.forEach((seq, i) => {
      const path = join(this.dir, segmentName(seq));
      const buf = this.disk.readFile(path);
      const last = i === segs.length - 1;
      /** Version 2: records count once the C record of their write is read (see the file's comment). */
      let framed = false;
      /** Where the write being read started (the end of the last complete one), and its records. */
      let writeStart = 0;
      let pending: Array<{ payload: string; pos: number }> = [];
      const apply = (payload: string, at: number) => {
        try {
          log.apply(payload, path, at);
        } catch (err) {
          if (err instanceof CorruptStorage) throw err;
          throw new CorruptStorage(`raft WAL ${path} at byte ${at}: ${(err as Error).message}`, { cause: err });
        }
      };
      let pos = 0;
      let cut: number | undefined;
      while (pos < buf.length) {
        const record = readRecord(buf, pos);
        if (record === undefined) {
          const next = findValidRecord(buf, pos + 1)?.pos;
          cut = !last ? undefined : framed ? tornWriteCut(buf, pos, writeStart) : next === undefined ? pos : undefined;
          if (cut === undefined) {
            throw new CorruptStorage(
              `raft WAL ${path} is damaged at byte ${pos} (a record fails its checksum or does not parse${!last ? ', in a segment before the last' : `, and a valid record follows at byte ${next}`}): ` +
                'acknowledged state may be lost, so this node will not start on it. Replace this node: move its data directory away and start it with --raft-join.',
            );
          }
          break;
        }
        const type = record.payload[0];
        if (pos === 0 && type === 'V') {
          if (record.payload !== `V ${WAL_VERSION}`) {
            throw new UnsupportedFormat(`raft WAL ${path} has format ${record.payload.slice(2, 20)}, newer than this release reads (${WAL_VERSION}): a newer Ticketing wrote it; run that release on this data directory`);
          }
          framed = true;
        } else if (!framed) apply(record.payload, pos);
        else if (type !== 'C') pending.push({ payload: record.payload, pos });
        else {
          if (Number(record.payload.slice(2)) !== pos - writeStart) throw new CorruptStorage(`raft WAL ${path} at byte ${pos}: a write's end record does not match its start`);
          for (const r of pending) apply(r.payload, r.pos);
          pending = [];
          writeStart = record.end;
        }
        pos = record.end;
      }
      // Records of a write whose end never reached the disk: it never returned, nothing acknowledged it.
      if (framed && pending.length > 0) cut ??= writeStart;
      if (cut !== undefined) tornWrite = true;
      if (cut !== undefined && repair) {
        // The last write never completed, so it was never acknowledged. Cut it, durably.
        this.disk.truncate(path, cut);
        const f = this.disk.openSync(path, 'append-dsync');
        f.sync();
        f.close();
      }
      if (last) this.lastFramed = framed;
    });
    this.segment = segs.at(-1) ?? 0;
    // A snapshot newer than the WAL's last S record (a crash between writing it and the new segment).
    if (snapshot !== undefined && snapshot.meta.index > log.snap.index) {
      log.installSnapshot(snapshot.meta);
      this.interruptedSnapshot = true;
    }
    if (log.snap.index > 0 && (snapshot === undefined || snapshot.meta.index < log.snap.index)) {
      throw new CorruptStorage(`the WAL says a snapshot through ${log.snap.index} was installed, but the newest readable one ends at ${snapshot?.meta.index ?? 0}`);
    }
    const fresh = segs.length === 0;
    const hardState: HardState = fresh ? { ...log.hard, membership: 'unknown' } : log.hard;
    // The WAL's S record names the snapshot; its file says which membership was in effect there.
    const snap = snapshot?.meta.index === log.snap.index ? snapshot.meta : log.snap;
    return { state: { hardState, snapshot: snap, entries: log.entries }, snapshot, fresh, tornWrite };
  }

  /** Appends one batch durably: one write, one fsync. */
  async save(batch: Batch): Promise<void> {
    return this.serial(async () => this.append(batch));
  }

  private async append(batch: Batch): Promise<void> {
    const data = encodeBatch(batch, this.segmentBytes === 0);
    if (data.length === 0) return;
    // O_DSYNC: the write returns once the data is on stable storage (one trip to the thread pool, not two).
    await writeAll(this.fd!, data, `the raft WAL in ${this.dir}`);
    this.segmentBytes += data.length;
    this.writes.syncedWrites++;
    this.writes.entries += batch.entries.length;
  }

  /**
   * Writes `snapshot` durably, then rewrites the WAL from it: a new segment
   * with `hard` and `tail` (the entries after the snapshot), then the old
   * segments and snapshots are removed.
   */
  async saveSnapshot(snapshot: StoredSnapshot, hard: Required<HardState>, tail: readonly Entry[]): Promise<void> {
    return this.serial(async () => this.writeSnapshot(snapshot, hard, tail));
  }

  /** `hard` with its membership: the new segment is all the WAL there is (issue 27, D-4: without it a joining node read as a member). */
  private async writeSnapshot(snapshot: StoredSnapshot, hard: Required<HardState>, tail: readonly Entry[]): Promise<void> {
    await replaceFileDurably(this.disk, join(this.dir, snapshotName(snapshot.meta.index)), Buffer.from(snapshot.text, 'utf8'));
    await this.startSegment(hard, tail, snapshot.meta);
    for (const file of this.disk.list(this.dir)) {
      const m = /^snapshot-(\d+)\.snap$/.exec(file);
      if (m !== null && Number(m[1]) < snapshot.meta.index) await this.disk.unlink(join(this.dir, file));
    }
  }

  /**
   * A fresh segment that stands on its own with the snapshot `installed`; then the older segments go.
   * It is written whole under a temporary name and renamed into place: its first record replaces
   * the log the older segments hold, so a segment cut short (a short write on a full disk, a torn
   * write at a power loss) must never be read as one; the entries it carries over were durable,
   * and acknowledged, in the old segments (whole-node simulation, swarm seed 1680).
   */
  private async startSegment(hard: HardState, tail: readonly Entry[], installed: SnapshotMeta): Promise<void> {
    const old = this.segments();
    await this.fd!.close();
    this.segment++;
    const path = join(this.dir, segmentName(this.segment));
    const data = encodeBatch({ hardState: hard, entries: tail, installed }, true);
    await replaceFileDurably(this.disk, path, data, `the raft WAL in ${this.dir}`);
    this.fd = await this.disk.open(path, 'append-dsync');
    this.segmentBytes = data.length;
    for (const seq of old) await this.disk.unlink(join(this.dir, segmentName(seq)));
  }

  /** True when the current segment is large: the runtime should take a snapshot soon. */
  get segmentFull(): boolean {
    return this.segmentBytes > SEGMENT_BYTES;
  }

  /**
   * After the writes queued before it. A storage that failed lets go of its
   * file too, and says nothing more: the failure stopped the node already, and
   * a SIGTERM that arrives meanwhile must still finish its shutdown (it threw
   * "failed earlier", an unhandled rejection in the signal handler).
   */
  async close(): Promise<void> {
    await this.chain;
    const fd = this.fd;
    this.fd = undefined;
    await fd?.close().catch((err: unknown) => {
      if (this.failed === undefined) throw err;
    });
  }

  /** For tests: total bytes of WAL on disk. */
  walBytes(): number {
    return this.segments().reduce((n, s) => n + this.disk.size(join(this.dir, segmentName(s))), 0);
  }
}
