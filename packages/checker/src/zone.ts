/**
 * A zone: the set of time values still possible for two unknowns, kept as a
 * difference-bound matrix (as in timed automata).
 *
 * The lock model needs exact reasoning about *when* operations took effect:
 * a lease runs from the grant's linearization point `g`, and each later
 * operation's point `p` is somewhere in its own interval. Fixing those points
 * greedily is wrong (an early `g` lets a later grant in but makes a later
 * `timeout` impossible), so both stay symbolic. Every constraint the model
 * uses has the form `x - y <= c` over {0, g, p}, and a DBM represents exactly
 * such sets, with an exact emptiness test.
 *
 * Clocks: 0 is the constant zero, 1 is `g` (the holder's grant point), 2 is
 * `p` (the point of the operation being placed). Entry [i][j] bounds
 * x_i - x_j from above. Values are integers (microseconds) or Infinity, so
 * sums are exact.
 */

const N = 3;
export const ZERO = 0;
export const G = 1;
export const P = 2;

export class Zone {
  private constructor(readonly d: Float64Array) {}

  /** No constraint at all (every point possible). */
  static unconstrained(): Zone {
    const d = new Float64Array(N * N).fill(Infinity);
    for (let i = 0; i < N; i++) d[i * N + i] = 0;
    return new Zone(d);
  }

  clone(): Zone {
    return new Zone(this.d.slice());
  }

  get(i: number, j: number): number {
    return this.d[i * N + j]!;
  }

  /** Adds x_i - x_j <= c. Call close() before asking whether the zone is empty. */
  bound(i: number, j: number, c: number): void {
    const k = i * N + j;
    if (c < this.d[k]!) this.d[k] = c;
  }

  /** Tightens every bound (Floyd-Warshall); returns false when no point is left. */
  close(): boolean {
    const d = this.d;
    for (let k = 0; k < N; k++) {
      for (let i = 0; i < N; i++) {
        const ik = d[i * N + k]!;
        if (ik === Infinity) continue;
        for (let j = 0; j < N; j++) {
          const viaK = ik + d[k * N + j]!;
          if (viaK < d[i * N + j]!) d[i * N + j] = viaK;
        }
      }
    }
    for (let i = 0; i < N; i++) if (d[i * N + i]! < 0) return false;
    return true;
  }

  /** g := p (a new grant takes effect at the current point). Keeps the zone closed. */
  grantAtP(): void {
    const d = this.d;
    for (let j = 0; j < N; j++) {
      d[G * N + j] = d[P * N + j]!;
      d[j * N + G] = d[j * N + P]!;
    }
    d[G * N + P] = 0;
    d[P * N + G] = 0;
    d[G * N + G] = 0;
  }

  /** Forgets g (nobody holds the key). Keeps the zone closed. */
  forgetG(): void {
    const d = this.d;
    for (let j = 0; j < N; j++) {
      d[G * N + j] = Infinity;
      d[j * N + G] = Infinity;
    }
    d[G * N + G] = 0;
  }

  /**
   * The next operation's point is at or after this one's: p loses its upper
   * bounds. Keeps the zone closed (only entries of p's row grow).
   */
  advanceP(): void {
    this.d[P * N + ZERO] = Infinity;
    this.d[P * N + G] = Infinity;
  }

  /** A compact, exact key for caching (the entries that can be finite after advanceP). */
  key(): string {
    const d = this.d;
    return `${d[ZERO * N + G]},${d[G * N + ZERO]},${d[ZERO * N + P]},${d[G * N + P]}`;
  }
}
