/**
 * Fencing tokens must never repeat across restarts. With a data directory,
 * the node reserves a block of tokens ahead of use by writing (and fsyncing)
 * a high-water mark; after a crash it starts above the last reservation.
 * One fsync per block of grants, not per grant: the next block is reserved
 * in the background when half of the current one is used.
 *
 * One floor for every mode: the mark is written as `<token> <mode>` (single,
 * priority or raft: the mode that issued the tokens below it), and whatever
 * mode the node starts in next starts above it. The modes count tokens on
 * different scales (a priority cluster's hybrid clock is µs x 256, a single
 * node's and Raft's floor is µs), so the mode says how to read the mark
 * against the clock. A mark written before modes were recorded is a bare
 * token. A mark that leaves no room below 2^64-1 is refused: it can only
 * come from a peer's garbage, and every grant would be refused with it.
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
import { mkdirDurable, replaceFileDurably, replaceFileDurablySync } from './durable-dir.js';
import type { Token } from '../state-machine/commands.js';
import { MAX_TOKEN } from '@ticketing/protocol';

/** Written at start-up and when a reservation is needed at once. */
const FILE = 'token-high-water';
/** Written in the background, ahead of need. */
const AHEAD_FILE = 'token-high-water.ahead';

export type TokenMode = 'single' | 'priority' | 'raft';
const MODES: readonly string[] = ['single', 'priority', 'raft'];

/** The highest mark a data directory may hold: room for a long life of tokens below 2^64-1. */
export const MAX_MARK = MAX_TOKEN - (1n << 48n);

/** What a data directory recorded: the token mark and the mode that wrote it (undefined: before modes were recorded). */
export interface RecordedMark {
  readonly token: Token;
  readonly mode: TokenMode | undefined;
}

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
    private readonly mode: TokenMode,
  ) {
    this.durable = start;
  }

  /**
   * Reads the last reservation in `dir` (creating the directory), and
   * reserves the first block. Returns the reservation, the first token the
   * node (running in `mode`) may issue: above every token a previous run
   * could have issued, in any mode, and at least `floor`; and what was
   * recorded.
   */
  static open(disk: Disk, dir: string, block: number, floor: Token, mode: TokenMode): { reservation: TokenReservation; firstToken: Token; recorded: RecordedMark | undefined } {
    mkdirDurable(disk, dir);
    const recorded = recordedMark(disk, dir);
    const previous = recorded?.token;
    const firstToken = previous !== undefined && previous > floor ? previous : floor;
    const reservation = new TokenReservation(disk, dir, BigInt(block), firstToken, mode);
    // Above the previous mark nothing was issued: the first grant reserves from there. Reserving a block
    // now would move the mark a block further on every restart that grants nothing (a crash loop), and
    // the tokens with it, ahead of the clock.
    if (firstToken !== previous) reservation.writeSync(firstToken + reservation.block);
    return { reservation, firstToken, recorded };
  }

  /** The durable high-water mark: no token at or above it has been issued. */
  get highWater(): Token {
    return this.durable;
  }

  /** May `next` be issued? Reserves the next block when needed. */
  readonly admit = (next: Token): boolean => {
    if (next < this.durable - this.block / 2n) return true;
    // Never a mark past MAX_MARK (peers' values are bounded before they get here; this is the last line).
    if (next + this.block > MAX_MARK) {
      this.fail(new Error(`token ${next} leaves no room below 2^64-1; refusing to reserve it`));
      return false;
    }
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
      await replaceFileDurably(this.disk, join(this.dir, AHEAD_FILE), Buffer.from(this.text(mark)));
      if (mark > this.durable) this.durable = mark;
    } catch (err) {
      this.fail(err as Error);
    } finally {
      this.writing = false;
    }
  }

  private writeSync(mark: Token): void {
    replaceFileDurablySync(this.disk, join(this.dir, FILE), Buffer.from(this.text(mark)));
    if (mark > this.durable) this.durable = mark;
  }

  private text(mark: Token): string {
    return `${mark} ${this.mode}\n`;
  }

  private fail(err: Error): void {
    if (this.failed !== undefined) return;
    this.failed = err;
    this.onFailure(err);
  }
}

/** The larger of the marks `dir` holds (undefined: none), checked as a start-up checks them. */
export function recordedMark(disk: Disk, dir: string): RecordedMark | undefined {
  return [readHighWater(disk, dir, FILE), readHighWater(disk, dir, AHEAD_FILE)].reduce<RecordedMark | undefined>(
    (a, b) => (b !== undefined && (a === undefined || b.token > a.token) ? b : a),
    undefined,
  );
}

function readHighWater(disk: Disk, dir: string, file: string): RecordedMark | undefined {
  let text: string;
  try {
    text = disk.readFile(join(dir, file)).toString('utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const trimmed = text.trim();
  const m = /^([1-9][0-9]{0,19})(?: ([a-z]+))?$/.exec(trimmed);
  if (m === null || (m[2] !== undefined && !MODES.includes(m[2]))) {
    throw new CorruptStorage(`${join(dir, file)} is corrupt (expected a decimal token and a mode, found ${JSON.stringify(trimmed.slice(0, 40))}); refusing to start rather than risk repeating a token`);
  }
  const token = BigInt(m[1]!);
  if (token > MAX_MARK) {
    throw new CorruptStorage(`${join(dir, file)} holds token ${token}, too close to 2^64-1 to issue any more; no node issues such tokens (a peer's garbage?): refusing to start`);
  }
  return { token, mode: m[2] as TokenMode | undefined };
}

/** Token units per microsecond of wall clock (the hybrid clock's scale, cluster/hlc.ts). */
export const TOKENS_PER_MICRO = 256n;

/**
 * The token floor at wall time `wallMs` (Unix ms), in every mode: Unix
 * microseconds x 256, the priority cluster's hybrid clock (cluster/hlc.ts).
 * One scale for all modes, so moving a data directory from one mode to
 * another, or a cluster to new disks, never lowers a token.
 */
export function clockFloor(wallMs: number): Token {
  return BigInt(Math.floor(wallMs)) * 1000n * TOKENS_PER_MICRO;
}

/** The wall time (Unix ms) a token of that scale stands for (logs, clock checks). */
export function tokenWallMs(token: Token): number {
  return Number(token / (1000n * TOKENS_PER_MICRO));
}

/**
 * Tokens a data directory reserves ahead per write of its high-water mark
 * in a priority cluster, whose tokens follow the clock: a quarter of
 * `failover-timeout` of clock (cluster/hlc.ts says why it stays small).
 */
export function clockReserveTokens(failoverTimeoutMs: number): number {
  return Math.max(1, Math.floor(failoverTimeoutMs / 4)) * 1000 * Number(TOKENS_PER_MICRO);
}
