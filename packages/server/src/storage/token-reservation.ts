/**
 * Fencing tokens must never repeat across restarts. With a data directory,
 * the node reserves a block of tokens ahead of use by writing (and fsyncing)
 * a high-water mark; after a crash it starts above the last reservation.
 * One fsync per block of grants, not per grant: the next block is reserved
 * in the background when half of the current one is used.
 *
 * If a reservation cannot be written, the node must not issue tokens beyond
 * the durable mark: `admit` then answers false and `onFailure` is told.
 *
 * Background and synchronous reservations write different files (each
 * through its own temporary file, fsynced and renamed), and the start-up
 * reads both and takes the larger: a late background write can never undo a
 * later synchronous one.
 */
import { join } from 'node:path';
import { CorruptStorage } from '../errors.js';
import type { Disk } from '../seams/disk.js';
import { mkdirDurable, replaceFileDurably, writeAllSync } from './durable-dir.js';
import type { Token } from '../state-machine/commands.js';

/** Written at start-up and when a reservation is needed at once. */
const FILE = 'token-high-water';
/** Written in the background, ahead of need. */
const AHEAD_FILE = 'token-high-water.ahead';

export class TokenReservation {
  /** Tokens below this are covered by a durable reservation. */
  private durable: Token;
  private writing = false;
  private failed: Error | undefined;
  /** Told once when a reservation cannot be written. */
  onFailure: (err: Error) => void = () => {};

  private constructor(
    private readonly disk: Disk,
    private readonly dir: string,
    private readonly block: bigint,
    start: Token,
  ) {
    this.durable = start;
  }

  /**
   * Reads the last reservation in `dir` (creating the directory), and
   * reserves the first block. Returns the reservation and the first token
   * the node may issue: above every token a previous run could have issued,
   * and at least `floor`.
   */
  static open(disk: Disk, dir: string, block: number, floor: Token): { reservation: TokenReservation; firstToken: Token } {
    mkdirDurable(disk, dir);
    const previous = [readHighWater(disk, dir, FILE), readHighWater(disk, dir, AHEAD_FILE)].reduce<Token | undefined>(
      (a, b) => (b !== undefined && (a === undefined || b > a) ? b : a),
      undefined,
    );
    const firstToken = previous !== undefined && previous > floor ? previous : floor;
    const reservation = new TokenReservation(disk, dir, BigInt(block), firstToken);
    // Above the previous mark nothing was issued: the first grant reserves from there. Reserving a block
    // now would move the mark a block further on every restart that grants nothing (a crash loop), and
    // the tokens with it, ahead of the clock.
    if (firstToken !== previous) reservation.writeSync(firstToken + reservation.block);
    return { reservation, firstToken };
  }

  /** The durable high-water mark: no token at or above it has been issued. */
  get highWater(): Token {
    return this.durable;
  }

  /** May `next` be issued? Reserves the next block when needed. */
  readonly admit = (next: Token): boolean => {
    if (next < this.durable - this.block / 2n) return true;
    if (next < this.durable) {
      if (!this.writing && this.failed === undefined) void this.reserveAhead(next + this.block);
      return true;
    }
    if (this.failed !== undefined) return false;
    try {
      this.writeSync(next + this.block);
      return true;
    } catch (err) {
      this.fail(err as Error);
      return false;
    }
  };

  private async reserveAhead(mark: Token): Promise<void> {
    this.writing = true;
    try {
      await replaceFileDurably(this.disk, join(this.dir, AHEAD_FILE), Buffer.from(`${mark}\n`));
      if (mark > this.durable) this.durable = mark;
    } catch (err) {
      this.fail(err as Error);
    } finally {
      this.writing = false;
    }
  }

  private writeSync(mark: Token): void {
    const tmp = join(this.dir, `${FILE}.tmp`);
    const file = this.disk.openSync(tmp, 'write');
    try {
      writeAllSync(file, Buffer.from(`${mark}\n`), tmp);
      file.sync();
    } finally {
      file.close();
    }
    this.disk.renameSync(tmp, join(this.dir, FILE));
    this.disk.syncDirSync(this.dir);
    if (mark > this.durable) this.durable = mark;
  }

  private fail(err: Error): void {
    if (this.failed !== undefined) return;
    this.failed = err;
    this.onFailure(err);
  }
}

function readHighWater(disk: Disk, dir: string, file: string): Token | undefined {
  let text: string;
  try {
    text = disk.readFile(join(dir, file)).toString('utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const trimmed = text.trim();
  if (!/^[1-9][0-9]{0,19}$/.test(trimmed)) {
    throw new CorruptStorage(`${join(dir, file)} is corrupt (expected a decimal token, found ${JSON.stringify(trimmed.slice(0, 30))}); refusing to start rather than risk repeating a token`);
  }
  return BigInt(trimmed);
}

/** Unix time in microseconds (from wall-clock milliseconds): the token floor of a node without a data directory. */
export function unixMicros(wallMs: number): Token {
  return BigInt(Math.floor(wallMs)) * 1000n;
}
