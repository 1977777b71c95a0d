import { nodeDisk } from '../../src/seams/node-disk.js';
import { appendFileSync, readdirSync, readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CorruptStorage, UnsupportedFormat } from '../../src/errors.js';
import { RaftStorage, snapshotText } from '../../src/raft/raft-storage.js';
import type { Disk } from '../../src/seams/disk.js';
import type { Entry } from '../../src/raft/types.js';
import { crc32 } from '../../src/raft/crc32.js';
import { mkdirSync } from 'node:fs';

const dir = () => mkdtempSync(join(tmpdir(), 'raft-storage-'));
const e = (index: number, term: number, command = `G k${index} 1000`): Entry => ({ index, term, command });
const wal = (d: string) => join(d, 'raft', readdirSync(join(d, 'raft')).find((f) => f.startsWith('wal-'))!);

/** One WAL record as the storage writes it: length, CRC-32, payload. */
function walRecord(payload: string): Buffer {
  const body = Buffer.from(payload);
  const head = Buffer.alloc(8);
  head.writeUInt32LE(body.length, 0);
  head.writeUInt32LE(crc32(body), 4);
  return Buffer.concat([head, body]);
}

/** A data directory whose Raft storage holds one snapshot (index 0, next token 9); its path. */
async function withOneSnapshot(): Promise<{ d: string; snap: string }> {
  const d = dir();
  const { storage } = await RaftStorage.open(nodeDisk, d);
  const table = { nextToken: '9', locks: [] };
  await storage.saveSnapshot({ meta: { index: 0, term: 0 }, table, text: snapshotText({ index: 0, term: 0 }, table) }, { term: 1, vote: undefined, commit: 0, membership: 'member' }, []);
  await storage.close();
  return { d, snap: join(d, 'raft', 'snapshot-000000000000.snap') };
}

describe('RaftStorage', () => {
  it('recovers hard state and entries, with later entries replacing a conflicting tail', async () => {
    const d = dir();
    const { storage } = await RaftStorage.open(nodeDisk, d);
    await storage.save({ hardState: { term: 1, vote: 'a', commit: 0 }, entries: [e(1, 1), e(2, 1), e(3, 1)] });
    await storage.save({ hardState: { term: 2, vote: 'b', commit: 2 }, truncateFrom: 3, entries: [e(3, 2, 'X k1 5'), e(4, 2)] });
    await storage.close();
    const { recovery, storage: again } = await RaftStorage.open(nodeDisk, d);
    expect(recovery.state.hardState).toEqual({ term: 2, vote: 'b', commit: 2, membership: 'member' });
    expect(recovery.state.entries).toEqual([e(1, 1), e(2, 1), e(3, 2, 'X k1 5'), e(4, 2)]);
    await again.close();
  });

  it('keeps commands with spaces and non-ASCII keys byte for byte', async () => {
    const d = dir();
    const { storage } = await RaftStorage.open(nodeDisk, d);
    const entries = [e(1, 1, 'G 🔒é\uFEFFk 30000'), e(2, 1, ''), e(3, 1, 'F 1796037162782000')];
    await storage.save({ entries });
    await storage.close();
    const { recovery, storage: again } = await RaftStorage.open(nodeDisk, d);
    expect(recovery.state.entries).toEqual(entries);
    await again.close();
  });

  it('cuts a torn tail (a write that never completed) and keeps everything before it', async () => {
    const d = dir();
    const { storage } = await RaftStorage.open(nodeDisk, d);
    await storage.save({ hardState: { term: 3, vote: 'a', commit: 1 }, entries: [e(1, 3), e(2, 3)] });
    await storage.save({ entries: [e(3, 3)] });
    await storage.close();
    const path = wal(d);
    truncateSync(path, statSync(path).size - 3); // the last record lost its end
    const { recovery, storage: again } = await RaftStorage.open(nodeDisk, d);
    expect(recovery.state.entries.map((x) => x.index)).toEqual([1, 2]);
    expect(recovery.state.hardState.term).toBe(3);
    // The cut is durable: appending goes on from there.
    await again.save({ entries: [e(3, 4)] });
    await again.close();
    const third = await RaftStorage.open(nodeDisk, d);
    expect(third.recovery.state.entries.at(-1)).toEqual(e(3, 4));
    await third.storage.close();
  });

  it('keeps entries a torn rewrite of the same entries cut into (issue 27, D-1)', async () => {
    const d = dir();
    const { storage } = await RaftStorage.open(nodeDisk, d);
    await storage.save({ hardState: { term: 2, vote: 'a', commit: 67 }, entries: Array.from({ length: 73 }, (_, i) => e(i + 1, 2)) });
    // InstallSnapshot through 67 on a follower that holds entry 67: the new segment keeps 68-73.
    const table = { nextToken: '9', locks: [] };
    const meta = { index: 67, term: 2 };
    const kept = Array.from({ length: 6 }, (_, i) => e(68 + i, 2));
    await storage.saveSnapshot({ meta, table, text: snapshotText(meta, table) }, { term: 2, vote: 'a', commit: 67, membership: 'member' }, kept);
    // The same entries written once more, and the write torn by a crash: only its first record whole.
    const before = statSync(wal(d)).size;
    await storage.save({ entries: kept });
    await storage.close();
    const oneRecord = 8 + Buffer.byteLength('E 68 2 G k68 1000');
    truncateSync(wal(d), before + oneRecord + 5);
    const { recovery, storage: again } = await RaftStorage.open(nodeDisk, d);
    // 68-73 were durable (and acknowledged) before the rewrite began: none of them is lost.
    expect(recovery.state.entries.map((x) => x.index)).toEqual([68, 69, 70, 71, 72, 73]);
    await again.close();
  });

  it('cuts a last write torn out of order, a later sector on disk and an earlier one not (issue 27, D-11)', async () => {
    const d = dir();
    const { storage } = await RaftStorage.open(nodeDisk, d);
    await storage.save({ hardState: { term: 3, vote: 'a', commit: 2 }, entries: [e(1, 3), e(2, 3)] });
    const start = statSync(wal(d)).size;
    // One write of many records (several sectors), never acknowledged: the power failed during it,
    // and the disk kept its last sectors but not an earlier one (devices reorder sector writes).
    await storage.save({ entries: Array.from({ length: 60 }, (_, i) => e(3 + i, 3, `G key-${'x'.repeat(20)}-${i} 1000`)) });
    await storage.close();
    const path = wal(d);
    const bytes = readFileSync(path);
    const hole = Math.ceil((start + 1) / 512) * 512; // the second sector this write touched
    bytes.fill(0, hole, hole + 512);
    writeFileSync(path, bytes);
    const { recovery, storage: again } = await RaftStorage.open(nodeDisk, d);
    expect(recovery.state.entries.map((x) => x.index)).toEqual([1, 2]);
    await again.close();
  });

  it('still refuses damage in a write that completed, with a later write after it', async () => {
    const d = dir();
    const { storage } = await RaftStorage.open(nodeDisk, d);
    await storage.save({ hardState: { term: 3, vote: 'a', commit: 2 }, entries: Array.from({ length: 60 }, (_, i) => e(1 + i, 3, `G key-${'x'.repeat(20)}-${i} 1000`)) });
    await storage.save({ entries: [e(61, 3)] });
    await storage.close();
    const path = wal(d);
    const bytes = readFileSync(path);
    bytes.fill(0, 1024, 1536);
    writeFileSync(path, bytes);
    await expect(RaftStorage.open(nodeDisk, d)).rejects.toBeInstanceOf(CorruptStorage);
  });

  it('reads a version 1 WAL (no format record, no write ends) and moves it to version 2 at start', async () => {
    const d = dir();
    mkdirSync(join(d, 'raft'));
    writeFileSync(join(d, 'raft', 'wal-0000000001.log'), Buffer.concat([walRecord('H 2 a 1 m'), walRecord('E 1 2 G k1 1000'), walRecord('E 2 2 G k2 1000')]));
    const { recovery, storage } = await RaftStorage.open(nodeDisk, d);
    expect(recovery.state.entries.map((x) => x.index)).toEqual([1, 2]);
    await storage.save({ entries: [e(3, 2)] });
    await storage.close();
    expect(readdirSync(join(d, 'raft')).filter((f) => f.startsWith('wal-'))).toEqual(['wal-0000000002.log']);
    const again = await RaftStorage.open(nodeDisk, d);
    expect(again.recovery.state.entries.map((x) => x.index)).toEqual([1, 2, 3]);
    expect(again.recovery.state.hardState).toEqual({ term: 2, vote: 'a', commit: 1, membership: 'member' });
    await again.storage.close();
  });

  it('drops a last write whose end never reached the disk, even when its records are whole', async () => {
    const d = dir();
    const { storage } = await RaftStorage.open(nodeDisk, d);
    await storage.save({ entries: [e(1, 1)] });
    await storage.save({ entries: [e(2, 1), e(3, 1)] });
    await storage.close();
    const path = wal(d);
    truncateSync(path, statSync(path).size - 3); // its C record lost its end
    const { recovery, storage: again } = await RaftStorage.open(nodeDisk, d);
    expect(recovery.state.entries.map((x) => x.index)).toEqual([1]);
    await again.close();
  });

  it('cuts a corrupt last write (bad checksum)', async () => {
    const d = dir();
    const { storage } = await RaftStorage.open(nodeDisk, d);
    await storage.save({ entries: [e(1, 1)] });
    await storage.save({ entries: [e(2, 1)] });
    await storage.close();
    const path = wal(d);
    const bytes = readFileSync(path);
    bytes[bytes.length - 2]! ^= 0xff;
    writeFileSync(path, bytes);
    const { recovery, storage: again } = await RaftStorage.open(nodeDisk, d);
    expect(recovery.state.entries.map((x) => x.index)).toEqual([1]);
    await again.close();
  });

  it('refuses to start on corruption before the last segment', async () => {
    const d = dir();
    const { storage } = await RaftStorage.open(nodeDisk, d);
    await storage.save({ entries: [e(1, 1)] });
    const table = { nextToken: '5', locks: [['k1', '3', 1000] as const] };
    await storage.saveSnapshot({ meta: { index: 1, term: 1 }, table, text: snapshotText({ index: 1, term: 1 }, table) }, { term: 1, vote: undefined, commit: 1, membership: 'member' }, []);
    await storage.save({ entries: [e(2, 1)] });
    await storage.close();
    // Now put a garbage record into an older segment.
    const older = join(d, 'raft', 'wal-0000000000.log');
    writeFileSync(older, Buffer.from([5, 0, 0, 0, 1, 2, 3, 4, 65, 65, 65, 65, 65]));
    appendFileSync(older, Buffer.alloc(0));
    await expect(RaftStorage.open(nodeDisk, d)).rejects.toBeInstanceOf(CorruptStorage);
  });

  it('writes snapshots atomically, rewrites the WAL from them and removes what they cover', async () => {
    const d = dir();
    const { storage } = await RaftStorage.open(nodeDisk, d);
    await storage.save({ hardState: { term: 2, vote: 'a', commit: 3 }, entries: [e(1, 1), e(2, 2), e(3, 2), e(4, 2)] });
    const table = { nextToken: '42', locks: [['a', '40', 30000] as const, ['é', '41', 5000] as const] };
    const meta = { index: 3, term: 2 };
    await storage.saveSnapshot({ meta, table, text: snapshotText(meta, table) }, { term: 2, vote: 'a', commit: 3, membership: 'member' }, [e(4, 2)]);
    await storage.save({ entries: [e(5, 2)] });
    await storage.close();
    const files = readdirSync(join(d, 'raft')).sort();
    expect(files.filter((f) => f.startsWith('wal-'))).toHaveLength(1);
    expect(files.filter((f) => f.endsWith('.snap'))).toEqual(['snapshot-000000000003.snap']);
    const { recovery, storage: again } = await RaftStorage.open(nodeDisk, d);
    expect(recovery.snapshot?.meta).toEqual(meta);
    expect(recovery.snapshot?.table).toEqual({ nextToken: '42', locks: [['a', '40', 30000], ['é', '41', 5000]] });
    expect(recovery.state.snapshot).toEqual(meta);
    expect(recovery.state.entries.map((x) => x.index)).toEqual([4, 5]);
    expect(recovery.state.hardState).toEqual({ term: 2, vote: 'a', commit: 3, membership: 'member' });
    await again.close();
  });

  it('finishes a snapshot a crash interrupted between its rename and the new segment, so later appends stay readable (sim seed 450542)', async () => {
    const d = dir();
    const { storage } = await RaftStorage.open(nodeDisk, d);
    await storage.save({ hardState: { term: 2, vote: 'a', commit: 3 }, entries: [e(1, 1), e(2, 2), e(3, 2)] });
    await storage.close();
    // A snapshot from the leader through index 8 reached its final name; the WAL switch did not happen.
    const table = { nextToken: '42', locks: [] };
    const meta = { index: 8, term: 2 };
    writeFileSync(join(d, 'raft', 'snapshot-000000000008.snap'), snapshotText(meta, table));
    const first = await RaftStorage.open(nodeDisk, d);
    expect(first.recovery.state.snapshot).toEqual(meta);
    expect(first.recovery.state.entries).toEqual([]);
    await first.storage.save({ hardState: { term: 2, vote: 'a', commit: 10 }, entries: [e(9, 2), e(10, 2)] });
    await first.storage.close();
    const second = await RaftStorage.open(nodeDisk, d);
    expect(second.recovery.state.snapshot).toEqual(meta);
    expect(second.recovery.state.entries.map((x) => x.index)).toEqual([9, 10]);
    expect(second.recovery.state.hardState.commit).toBe(10);
    await second.storage.close();
  });

  it('keeps the entries a snapshot carries over when writing its new segment fails half-way (sim swarm seed 1680)', async () => {
    const d = dir();
    const { storage } = await RaftStorage.open(nodeDisk, d);
    // Entries 1-8 are durable (and so acknowledged); a snapshot through 3 carries 4-8 into a new segment.
    await storage.save({ hardState: { term: 2, vote: 'a', commit: 3 }, entries: [1, 2, 3, 4, 5, 6, 7, 8].map((i) => e(i, 2)) });
    await storage.close();
    // The disk fills while the new segment's first write runs: only part of it lands (a torn write
    // under a power loss leaves the same).
    const halfWrites: Disk = {
      ...nodeDisk,
      open: async (path, mode) => {
        const f = await nodeDisk.open(path, mode);
        if (!path.includes('wal-0000000002')) return f;
        return { ...f, write: async (data) => f.write(data.subarray(0, Math.floor(data.length / 2))), sync: async () => f.sync(), close: async () => f.close() };
      },
    };
    const { storage: failing } = await RaftStorage.open(halfWrites, d);
    const table = { nextToken: '42', locks: [] };
    const meta = { index: 3, term: 2 };
    await expect(failing.saveSnapshot({ meta, table, text: snapshotText(meta, table) }, { term: 2, vote: 'a', commit: 3, membership: 'member' }, [4, 5, 6, 7, 8].map((i) => e(i, 2)))).rejects.toThrow(/short write/);
    await failing.close().catch(() => undefined);
    const { recovery, storage: again } = await RaftStorage.open(nodeDisk, d);
    expect(recovery.state.snapshot.index + recovery.state.entries.length).toBe(8);
    expect(recovery.state.entries.at(-1)).toEqual(e(8, 2));
    expect(readdirSync(join(d, 'raft')).filter((f) => f.endsWith('.tmp'))).toEqual([]);
    await again.close();
  });

  it('falls back to an older snapshot when the newest is damaged, if the WAL still covers it', async () => {
    const { d, snap } = await withOneSnapshot();
    writeFileSync(snap, readFileSync(snap, 'utf8').replace('"nextToken":"9"', '"nextToken":"8"') + 'garbage\n');
    const { recovery, storage: again } = await RaftStorage.open(nodeDisk, d);
    expect(recovery.snapshot).toBeUndefined();
    await again.close();
  });

  it('refuses a snapshot of a newer format by name, rather than fall back to an older one', async () => {
    const { d, snap } = await withOneSnapshot();
    writeFileSync(snap, readFileSync(snap, 'utf8').replace(/"v":\d+/, '"v":4'));
    const opened = RaftStorage.open(nodeDisk, d);
    await expect(opened).rejects.toThrow(UnsupportedFormat);
    await expect(opened).rejects.toThrow(`${snap}: snapshot has format 4, newer than this release reads (3)`);
  });

  it('refuses a WAL segment of a newer format by name', async () => {
    const d = dir();
    const { storage } = await RaftStorage.open(nodeDisk, d);
    await storage.save({ entries: [e(1, 1)] });
    await storage.close();
    const path = wal(d);
    writeFileSync(path, walRecord('V 3'));
    await expect(RaftStorage.open(nodeDisk, d)).rejects.toThrow(new UnsupportedFormat(`raft WAL ${path} has format 3, newer than this release reads (2): a newer Ticketing wrote it; run that release on this data directory`));
  });
});
