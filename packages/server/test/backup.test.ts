import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConfigError, CorruptStorage, DataDirInUseError, UnsupportedFormat } from '../src/errors.js';
import { RaftStorage } from '../src/raft/raft-storage.js';
import { nodeDisk } from '../src/seams/node-disk.js';
import { encodeCommand } from '../src/state-machine/command-codec.js';
import { backupOfDataDir, encodeBackup, parseBackup, restoreBackup, type Backup } from '../src/storage/backup.js';
import { DataDirLock } from '../src/storage/data-dir-lock.js';
import { MAX_MARK, TokenReservation } from '../src/storage/token-reservation.js';

const dir = () => mkdtempSync(join(tmpdir(), 'backup-'));
const NOW = new Date('2026-12-02T12:00:00.000Z');
const FLOOR = 459_000_000_000_000_000n;

const backup = (over: Partial<Backup> = {}): Backup => ({
  takenAt: NOW.toISOString(),
  node: 'a',
  mode: 'raft',
  tokenFloor: FLOOR,
  index: 40,
  term: 3,
  locks: [
    ['orders/1', (FLOOR - 5n).toString(), 30_000],
    ['orders/2', (FLOOR - 2n).toString(), 5_000, 'billing'],
  ],
  ...over,
});

/** The backup's text with its header edited (its checksum kept, so only the edit can be refused). */
function withHeader(b: Backup, edit: (h: Record<string, unknown>) => void): string {
  const text = encodeBackup(b);
  const nl = text.indexOf('\n');
  const h = JSON.parse(text.slice(0, nl)) as Record<string, unknown>;
  edit(h);
  return `${JSON.stringify(h)}${text.slice(nl)}`;
}

describe('backup files', () => {
  it('read back exactly what was written, for any locks a client could hold', () => {
    const key = fc.stringMatching(/^[a-z0-9/_-]{1,40}$/);
    const lock = fc.tuple(key, fc.bigInt({ min: 1n, max: FLOOR - 1n }), fc.integer({ min: 1, max: 250_000 }), fc.option(fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/), { nil: undefined }));
    fc.assert(
      fc.property(fc.uniqueArray(lock, { selector: (l) => l[0], maxLength: 30 }), fc.constantFrom('single', 'priority', 'raft' as const), (locks, mode) => {
        const b = backup({ mode, locks: locks.map(([k, t, l, o]) => (o === undefined ? [k, t.toString(), l] : [k, t.toString(), l, o])) });
        expect(parseBackup(encodeBackup(b))).toEqual(b);
      }),
    );
  });

  it('refuse damage, a newer format by name, and values no node could have written', () => {
    const good = encodeBackup(backup());
    expect(() => parseBackup(good.replace('orders/1', 'orders/9'))).toThrow(/checksum/);
    expect(() => parseBackup(good.replace(`"tokenFloor":"${FLOOR}"`, `"tokenFloor":"${FLOOR - 100n}"`))).toThrow(/checksum/);
    expect(() => parseBackup(good.slice(0, -3))).toThrow(CorruptStorage);
    expect(() => parseBackup('hello\n')).toThrow(/not a Ticketing backup/);
    expect(() => parseBackup('{"kind":"x"}\n')).toThrow(/not a Ticketing backup/);
    expect(() => parseBackup(withHeader(backup(), (h) => (h.v = 2)))).toThrow(UnsupportedFormat);
    // Past the checksum (recomputed, as a forger would): every value is still bounded.
    const forged = (b: Backup) => () => parseBackup(encodeBackup(b));
    expect(forged(backup({ tokenFloor: MAX_MARK }))).toThrow(/token floor/);
    expect(forged(backup({ tokenFloor: 0n, locks: [] }))).toThrow(/token floor/);
    expect(forged(backup({ locks: [['k', FLOOR.toString(), 1000]] }))).toThrow(/below the token floor/);
    expect(forged(backup({ locks: [['bad key', '7', 1000]] }))).toThrow(CorruptStorage);
    expect(forged(backup({ locks: [['k', '7', 0]] }))).toThrow(/lease/);
    expect(forged(backup({ locks: [['k', '7', 1000, 'not an identity!']] }))).toThrow(CorruptStorage);
    expect(forged(backup({ node: '../x' }))).toThrow(/node/);
    expect(forged(backup({ mode: 'other' as Backup['mode'] }))).toThrow(/mode/);
  });
});

describe('restoring a backup', () => {
  it('into Raft mode: the node recovers its locks at the backup position, and issues tokens above the floor however far behind its clock is', async () => {
    const d = join(dir(), 'new');
    await restoreBackup(nodeDisk, d, backup(), 'raft', NOW);
    const { storage, recovery } = await RaftStorage.open(nodeDisk, d);
    await storage.close();
    expect(recovery.snapshot?.meta).toEqual({ index: 40, term: 3 });
    expect(recovery.snapshot?.table).toEqual({ nextToken: FLOOR.toString(), locks: backup().locks });
    expect(recovery.state.hardState).toMatchObject({ term: 3, commit: 40, membership: 'member' });
    expect(recovery.fresh).toBe(false);
    // The clock says 1970: the recorded mark still wins.
    const { firstToken } = TokenReservation.open(nodeDisk, d, 1000, 1n, 'raft');
    expect(firstToken > FLOOR).toBe(true);
  });

  it('into single or priority mode: only the token floor (those modes keep no locks on disk)', async () => {
    for (const mode of ['single', 'priority'] as const) {
      const d = dir();
      await restoreBackup(nodeDisk, d, backup(), mode, NOW);
      expect(existsSync(join(d, 'raft'))).toBe(false);
      expect(readFileSync(join(d, 'FORMAT'), 'utf8')).toBe('1\n');
      expect(TokenReservation.open(nodeDisk, d, 1000, 1n, mode).firstToken > FLOOR).toBe(true);
    }
  });

  it('never over existing state, nor into a directory a node has open', async () => {
    const full = dir();
    writeFileSync(join(full, 'token-high-water'), '5 single\n');
    await expect(restoreBackup(nodeDisk, full, backup(), 'raft', NOW)).rejects.toThrow(ConfigError);
    expect(readFileSync(join(full, 'token-high-water'), 'utf8')).toBe('5 single\n');
    const held = dir();
    const lock = DataDirLock.acquire(nodeDisk, held, 'a running node');
    try {
      await expect(restoreBackup(nodeDisk, held, backup(), 'raft', NOW)).rejects.toThrow(DataDirInUseError);
    } finally {
      lock.release();
    }
  });
});

describe('a backup of a stopped node\'s data directory', () => {
  it('applies every entry its log holds, committed or not, and takes the larger of the table\'s next token and the recorded mark', async () => {
    const d = dir();
    await restoreBackup(nodeDisk, d, backup({ locks: [['orders/1', (FLOOR - 5n).toString(), 30_000]] }), 'raft', NOW);
    const { storage } = await RaftStorage.open(nodeDisk, d);
    const grant = encodeCommand({ type: 'grant', key: 'orders/3', leaseMs: 9_000 });
    const release = encodeCommand({ type: 'release', key: 'orders/1', token: FLOOR - 5n });
    // Entries 41 and 42, with a commit index that never reached them: the survivor cannot know whether they committed.
    await storage.save({ entries: [{ index: 41, term: 4, command: grant }, { index: 42, term: 4, command: release }], hardState: { term: 4, vote: 'a', commit: 40 } });
    await storage.close();
    const b = backupOfDataDir(nodeDisk, d, 'a', NOW);
    expect(b.locks).toEqual([['orders/3', FLOOR.toString(), 9_000]]);
    expect(b.tokenFloor).toBe(FLOOR + 1n);
    expect({ index: b.index, term: b.term, mode: b.mode }).toEqual({ index: 42, term: 4, mode: 'raft' });
    // A mark above the table (tokens reserved ahead) is the floor then.
    writeFileSync(join(d, 'token-high-water'), `${FLOOR + 1000n} raft\n`);
    expect(backupOfDataDir(nodeDisk, d, 'a', NOW).tokenFloor).toBe(FLOOR + 1000n);
  });

  it('of a single node: its mark, no locks; refuses a missing directory, one that is no data directory, and one in use', () => {
    const d = dir();
    writeFileSync(join(d, 'token-high-water'), `${FLOOR} single\n`);
    expect(backupOfDataDir(nodeDisk, d, 'a', NOW)).toMatchObject({ mode: 'single', tokenFloor: FLOOR, locks: [] });
    expect(existsSync(join(d, 'FORMAT'))).toBe(false); // read only
    expect(() => backupOfDataDir(nodeDisk, join(d, 'missing'), 'a', NOW)).toThrow(/does not exist/);
    const empty = join(d, 'empty');
    mkdirSync(empty);
    expect(() => backupOfDataDir(nodeDisk, empty, 'a', NOW)).toThrow(/not .*a Ticketing data directory|is it a Ticketing data directory/);
    const lock = DataDirLock.acquire(nodeDisk, d, 'a running node');
    try {
      expect(() => backupOfDataDir(nodeDisk, d, 'a', NOW)).toThrow(DataDirInUseError);
    } finally {
      lock.release();
    }
  });
});
