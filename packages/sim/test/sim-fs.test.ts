import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { seededRandom } from '@ticketing/checker';
import { SECTOR, SimFs, SimFsError } from '../src/sim-fs.js';

function fsWithDir(): SimFs {
  const fs = new SimFs();
  fs.mkdir('/data');
  fs.fsyncDir('/');
  return fs;
}

describe('SimFs: what survives a crash', () => {
  it('keeps fsynced data and a durable name whatever the crash does', () => {
    for (let seed = 0; seed < 50; seed++) {
      const fs = fsWithDir();
      const fd = fs.open('/data/a', { create: true });
      fs.write(fd, Buffer.from('hello'));
      fs.fsync(fd);
      fs.fsyncDir('/data');
      fs.write(fd, Buffer.from(' world, not synced'));
      const after = fs.crash(seededRandom(seed));
      expect(after.readFile('/data/a').subarray(0, 5).toString()).toBe('hello');
    }
  });

  it('loses a new name until its directory is fsynced, even when the data was fsynced', () => {
    const outcomes = new Set<boolean>();
    for (let seed = 0; seed < 50; seed++) {
      const fs = fsWithDir();
      const fd = fs.open('/data/new', { create: true, dsync: true });
      fs.write(fd, Buffer.from('x'));
      outcomes.add(fs.crash(seededRandom(seed)).exists('/data/new'));
    }
    expect(outcomes).toEqual(new Set([true, false]));
    const fs = fsWithDir();
    fs.open('/data/new', { create: true });
    fs.fsyncDir('/data');
    for (let seed = 0; seed < 20; seed++) expect(fs.crash(seededRandom(seed)).exists('/data/new')).toBe(true);
  });

  it('an O_DSYNC write is durable when it returns', () => {
    const fs = fsWithDir();
    const fd = fs.open('/data/wal', { create: true, dsync: true, append: true });
    fs.fsyncDir('/data');
    fs.write(fd, Buffer.from('abc'));
    fs.write(fd, Buffer.from('def'));
    for (let seed = 0; seed < 20; seed++) expect(fs.crash(seededRandom(seed)).readFile('/data/wal').toString()).toBe('abcdef');
  });

  it('keeps a prefix of unsynced appends, tearing the last kept one at a sector boundary', () => {
    const seen = new Set<string>();
    const writes = [Buffer.alloc(700, 1), Buffer.alloc(900, 2), Buffer.alloc(300, 3)];
    const full = Buffer.concat(writes);
    for (let seed = 0; seed < 300; seed++) {
      const fs = fsWithDir();
      const fd = fs.open('/data/log', { create: true, append: true });
      fs.fsyncDir('/data');
      for (const w of writes) fs.write(fd, w);
      const got = fs.crash(seededRandom(seed)).readFile('/data/log');
      // Whatever survived is the written data up to a point, then at most one sector of junk.
      let same = 0;
      while (same < got.length && got[same] === full[same]) same++;
      expect(got.length - same).toBeLessThanOrEqual(SECTOR);
      seen.add(got.length === full.length && same === full.length ? 'all' : got.length === 0 ? 'none' : same === got.length ? 'prefix' : 'torn');
    }
    expect(seen).toEqual(new Set(['all', 'none', 'prefix', 'torn']));
  });

  it('a rename is atomic: after a crash the target holds the old or the new file, never a mix', () => {
    for (let seed = 0; seed < 50; seed++) {
      const fs = fsWithDir();
      const old = fs.open('/data/snap', { create: true });
      fs.write(old, Buffer.from('old'));
      fs.fsync(old);
      fs.fsyncDir('/data');
      const tmp = fs.open('/data/snap.tmp', { create: true });
      fs.write(tmp, Buffer.from('new'));
      fs.fsync(tmp);
      fs.rename('/data/snap.tmp', '/data/snap');
      const text = fs.crash(seededRandom(seed)).readFile('/data/snap').toString();
      expect(['old', 'new']).toContain(text);
    }
  });

  it('a rename moves the name whole: after a crash the file has its old name or its new one, never both (swarm seed 179)', () => {
    const fs = fsWithDir();
    const tmp = fs.open('/data/mark.tmp', { create: true });
    fs.write(tmp, Buffer.from('42'));
    fs.fsync(tmp);
    fs.fsyncDir('/data');
    fs.rename('/data/mark.tmp', '/data/mark');
    for (const prefix of [0, 1, 2]) {
      const after = fs.crash(seededRandom(prefix), prefix);
      expect([after.exists('/data/mark.tmp'), after.exists('/data/mark')].filter(Boolean)).toHaveLength(1);
      // Two names on one file: the next write through the temporary name emptied the real file.
      if (after.exists('/data/mark')) expect(after.readFile('/data/mark').toString()).toBe('42');
    }
  });

  it('replays a crash exactly from its seed', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 }), fc.array(fc.uint8Array({ minLength: 1, maxLength: 2000 }), { maxLength: 6 }), (seed, chunks) => {
        const run = () => {
          const fs = fsWithDir();
          const fd = fs.open('/data/f', { create: true, append: true });
          for (const c of chunks) fs.write(fd, Buffer.from(c));
          return fs.crash(seededRandom(seed)).filesUnder('/').map((f) => f.path + ':' + f.size);
        };
        expect(run()).toEqual(run());
      }),
      { numRuns: 50 },
    );
  });
});

describe('SimFs: injected faults', () => {
  it('a short write reports the bytes it wrote', () => {
    const fs = fsWithDir();
    const fd = fs.open('/data/f', { create: true });
    fs.faults.shortWrite = 1;
    expect(fs.write(fd, Buffer.alloc(1000))).toBe(500);
    expect(fs.write(fd, Buffer.alloc(1000))).toBe(1000);
    expect(fs.size('/data/f')).toBe(1500);
  });

  it('a full disk writes what fits, then refuses with ENOSPC', () => {
    const fs = fsWithDir();
    fs.capacity = 1200;
    const fd = fs.open('/data/f', { create: true });
    expect(fs.write(fd, Buffer.alloc(1000))).toBe(1000);
    expect(fs.write(fd, Buffer.alloc(1000))).toBe(200);
    expect(() => fs.write(fd, Buffer.alloc(10))).toThrow(SimFsError);
  });

  it('a failed fsync drops the unsynced data (Linux semantics) and says EIO', () => {
    const fs = fsWithDir();
    const fd = fs.open('/data/f', { create: true });
    fs.write(fd, Buffer.from('kept'));
    fs.fsync(fd);
    fs.write(fd, Buffer.from(' lost'));
    fs.faults.eioSync = 1;
    expect(() => fs.fsync(fd)).toThrow(/EIO/);
    expect(fs.readFile('/data/f').toString()).toBe('kept');
  });

  it('corrupts one whole sector of old, durable data', () => {
    const fs = fsWithDir();
    const fd = fs.open('/data/f', { create: true });
    fs.write(fd, Buffer.alloc(3 * SECTOR, 7));
    fs.fsync(fd);
    fs.corruptSector('/data/f', SECTOR + 10, seededRandom(1));
    const data = fs.readFile('/data/f');
    expect(data.subarray(0, SECTOR).every((b) => b === 7)).toBe(true);
    expect(data.subarray(SECTOR, 2 * SECTOR).every((b) => b === 7)).toBe(false);
    expect(data.subarray(2 * SECTOR).every((b) => b === 7)).toBe(true);
  });

  it('a wiped directory is gone for good', () => {
    const fs = fsWithDir();
    fs.mkdir('/data/raft');
    fs.fsyncDir('/data');
    const fd = fs.open('/data/raft/wal', { create: true });
    fs.fsyncDir('/data/raft');
    fs.write(fd, Buffer.from('x'));
    fs.fsync(fd);
    fs.wipe('/data/raft');
    expect(fs.exists('/data/raft')).toBe(false);
    expect(fs.crash(seededRandom(3)).exists('/data/raft/wal')).toBe(false);
  });

  it('a write under way at a power loss may keep a later sector and not an earlier one, O_DSYNC too', () => {
    const outcomes = new Set<string>();
    for (let seed = 0; seed < 200; seed++) {
      const fs = fsWithDir();
      const fd = fs.open('/data/wal', { create: true, append: true, dsync: true });
      fs.write(fd, Buffer.alloc(SECTOR, 0x41));
      fs.fsyncDir('/data');
      const id = fs.beginWrite(fd, Buffer.alloc(3 * SECTOR, 0x42));
      const after = fs.crash(seededRandom(seed)).readFile('/data/wal');
      expect(after.subarray(0, SECTOR).every((b) => b === 0x41)).toBe(true); // what returned is kept
      const sectors = [1, 2, 3].map((i) => (after.length >= (i + 1) * SECTOR && after.subarray(i * SECTOR, (i + 1) * SECTOR).every((b) => b === 0x42) ? 'B' : '-'));
      outcomes.add(sectors.join(''));
      fs.endWrite(id);
    }
    expect(outcomes).toContain('---');
    expect(outcomes).toContain('BBB');
    expect(outcomes).toContain('-B-'); // out of order
    expect(outcomes).toContain('--B');
  });

  it('a write whose process died before it returned never happened', () => {
    const fs = fsWithDir();
    const fd = fs.open('/data/wal', { create: true, append: true, dsync: true });
    fs.fsyncDir('/data');
    const id = fs.beginWrite(fd, Buffer.alloc(2 * SECTOR, 0x42));
    fs.endWrite(id); // killed: the write was never made
    for (let seed = 0; seed < 20; seed++) expect(fs.crash(seededRandom(seed)).readFile('/data/wal').length).toBe(0);
  });

  it('EIO on open, rename and directory fsync, once each', () => {
    const fs = fsWithDir();
    fs.faults.eioOpen = 1;
    fs.faults.eioRename = 1;
    fs.faults.eioSyncDir = 1;
    expect(() => fs.open('/data/a', { create: true })).toThrow(/EIO/);
    const fd = fs.open('/data/a', { create: true });
    fs.close(fd);
    expect(() => fs.rename('/data/a', '/data/b')).toThrow(/EIO/);
    fs.rename('/data/a', '/data/b');
    expect(() => fs.fsyncDir('/data')).toThrow(/EIO/);
    fs.fsyncDir('/data');
    expect(fs.faultsFired).toBe(3);
  });

  it('a misdirected write reports success and lands sectors before where it was asked', () => {
    const fs = fsWithDir();
    const fd = fs.open('/data/wal', { create: true, append: true, dsync: true });
    fs.write(fd, Buffer.alloc(4 * SECTOR, 0x41));
    fs.faults.misdirect = 1;
    expect(fs.write(fd, Buffer.alloc(10, 0x42))).toBe(10);
    const data = fs.readFile('/data/wal');
    expect(data.length).toBe(4 * SECTOR); // nothing at the end, where it belonged
    expect(data.includes(0x42)).toBe(true); // older data overwritten instead
  });
});
