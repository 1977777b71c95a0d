/**
 * The set of operations already placed in the linearization, as bitsets,
 * with an incremental hash and compact snapshots for the search's cache.
 *
 * Completed operations and operations of unknown outcome live in separate
 * bitsets: completed ones are placed roughly in time order, so their bitset
 * is a run of full words, a short ragged frontier, then zeros, and a
 * snapshot keeps only the frontier. Unknown operations may stay unplaced
 * forever; in the same bitset they would keep the frontier from moving.
 */

const FULL = 0xffffffff;

export interface Snapshot {
  readonly lo: number;
  readonly frontier: Uint32Array;
  readonly unknown: Uint32Array;
}

/** A fixed pseudo-random 32-bit value per index (splitmix-style), for Zobrist hashing. */
function mix(x: number): number {
  let h = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

export class OpSet {
  private readonly done: Uint32Array;
  private readonly unknown: Uint32Array;
  /** The first word of `done` that is not full (exact, so snapshots are canonical). */
  private lo = 0;
  /** One past the last non-zero word of `done` (exact). */
  private hi = 0;
  private h1 = 0;
  private h2 = 0;

  /** `isUnknown[i]` says which bitset op i goes to; `bit[i]` is its place there. */
  constructor(
    private readonly isUnknown: Uint8Array,
    private readonly bit: Int32Array,
  ) {
    let done = 0;
    for (const u of isUnknown) if (u === 0) done++;
    this.done = new Uint32Array(Math.ceil(done / 32));
    this.unknown = new Uint32Array(Math.ceil((isUnknown.length - done) / 32));
  }

  add(i: number): void {
    this.flip(i);
    if (this.isUnknown[i] === 1) return;
    const w = this.bit[i]! >>> 5;
    if (w >= this.hi) this.hi = w + 1;
    while (this.lo < this.done.length && this.done[this.lo] === FULL) this.lo++;
  }

  remove(i: number): void {
    this.flip(i);
    if (this.isUnknown[i] === 1) return;
    const w = this.bit[i]! >>> 5;
    if (w < this.lo) this.lo = w;
    while (this.hi > 0 && this.done[this.hi - 1] === 0) this.hi--;
  }

  private flip(i: number): void {
    const b = this.bit[i]!;
    if (this.isUnknown[i] === 1) {
      this.unknown[b >>> 5]! ^= 1 << (b & 31);
      return;
    }
    this.done[b >>> 5]! ^= 1 << (b & 31);
    this.h1 ^= mix(2 * i + 1);
    this.h2 ^= mix(~i);
  }

  /** The hash of the completed operations in the set (equal sets, equal hashes). */
  hash(): string {
    return `${this.h1.toString(36)}.${this.h2.toString(36)}`;
  }

  snapshot(): Snapshot {
    return { lo: this.lo, frontier: this.done.slice(this.lo, this.hi), unknown: this.unknown.slice() };
  }

  /**
   * True if `s` has the same completed operations and at most the same
   * unknown ones: from `s` every continuation of this set is possible too
   * (an unknown operation may always be left out).
   */
  coveredBy(s: Snapshot): boolean {
    const lo = this.lo;
    if (s.lo !== lo || s.frontier.length !== this.hi - lo) return false;
    for (let w = 0; w < s.frontier.length; w++) if (s.frontier[w] !== this.done[lo + w]) return false;
    for (let w = 0; w < s.unknown.length; w++) if ((s.unknown[w]! & ~this.unknown[w]!) !== 0) return false;
    return true;
  }
}
