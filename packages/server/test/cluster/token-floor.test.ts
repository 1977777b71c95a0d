/**
 * One token floor for every mode (issue 26, defect 5): the data directory
 * records its mark and the mode that wrote it, every mode starts above it on
 * the hybrid clock's scale, and a mark no node could have written (a peer's
 * garbage near 2^64) is refused rather than believed.
 */
import { describe, expect, it } from 'vitest';
import { clockFloor, MAX_MARK, TokenReservation } from '../../src/storage/token-reservation.js';
import { MemoryDisk } from '../fakes/memory-disk.js';

function write(disk: MemoryDisk, path: string, text: string): void {
  const dir = path.slice(0, path.lastIndexOf('/'));
  try {
    disk.mkdir(dir);
  } catch {
    // there already
  }
  const f = disk.openSync(path, 'write');
  f.write(Buffer.from(text));
  f.close();
}

const NOW = 1_764_000_000_000;

describe('token floor', () => {
  it('records the mode with the mark, and reads marks written before modes were', () => {
    const disk = new MemoryDisk();
    const { recorded } = TokenReservation.open(disk, '/d', 1_000, clockFloor(NOW), 'priority');
    expect(recorded).toBeUndefined();
    expect(disk.readFile('/d/token-high-water').toString()).toMatch(/^\d+ priority\n$/);
    write(disk, '/old/token-high-water', '1764000000000000\n');
    expect(TokenReservation.open(disk, '/old', 1_000, clockFloor(NOW), 'single').recorded).toEqual({ token: 1_764_000_000_000_000n, mode: undefined });
  });

  it('starts above a mark written in another mode, whatever the mode now', () => {
    const disk = new MemoryDisk();
    const priorityMark = clockFloor(NOW + 60_000); // a priority cluster's tokens, a minute ahead
    write(disk, '/d/token-high-water', `${priorityMark} priority\n`);
    for (const mode of ['raft', 'single'] as const) {
      const { firstToken, recorded } = TokenReservation.open(disk, '/d', 1_000, clockFloor(NOW), mode);
      expect(recorded?.mode).toBe('priority');
      expect(firstToken).toBeGreaterThanOrEqual(priorityMark);
    }
  });

  it('the clock floor is the same scale in every mode: far above the Unix microseconds of earlier versions', () => {
    expect(clockFloor(NOW)).toBe(BigInt(NOW) * 1000n * 256n);
    expect(clockFloor(NOW)).toBeGreaterThan(BigInt(NOW + 10 * 365 * 24 * 3600 * 1000) * 1000n);
  });

  it('refuses a mark too close to 2^64-1 to issue any more, and never reserves past it', () => {
    const disk = new MemoryDisk();
    write(disk, '/d/token-high-water', `${(1n << 64n) - 2n} priority\n`);
    expect(() => TokenReservation.open(disk, '/d', 1_000, clockFloor(NOW), 'priority')).toThrow(/too close to 2\^64-1/);
    const { reservation } = TokenReservation.open(disk, '/e', 1_000, clockFloor(NOW), 'priority');
    let failed: Error | undefined;
    reservation.onFailure = (err) => (failed = err);
    expect(reservation.admit(MAX_MARK)).toBe(false);
    expect(failed?.message).toMatch(/no room below 2\^64-1/);
    expect(BigInt(disk.readFile('/e/token-high-water').toString().split(' ')[0]!)).toBeLessThan(MAX_MARK);
  });

  it('refuses a damaged mark or an unknown mode', () => {
    const disk = new MemoryDisk();
    write(disk, '/d/token-high-water', '12 sideways\n');
    expect(() => TokenReservation.open(disk, '/d', 1_000, clockFloor(NOW), 'single')).toThrow(/corrupt/);
  });
});
