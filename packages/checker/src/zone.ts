/**
 * A zone: the set of time values still possible for a few unknown points,
 * kept as a difference-bound matrix (as in timed automata).
 *
 * The lock model needs exact reasoning about *when* operations took effect:
 * a lease runs from the grant's point, and every operation's point lies
 * somewhere in its own interval. Fixing those points greedily is wrong (an
 * early grant lets a later grant in but makes a later `timeout`
 * impossible), so they stay symbolic. Every constraint the model uses has
 * the form `x - y <= c`, and a DBM represents exactly such sets, with an
 * exact emptiness test.
 *
 * Clocks: ZERO is the constant 0; G the holder's grant point; S the point of
 * the last operation that changed the key's state; P the point of the next
 * such operation (observations made since S push its lower bound up).
 * Entry [i][j] bounds x_i - x_j from above. Values are integers
 * (microseconds) or Infinity, so sums are exact.
 */

const N = 4;
export const ZERO = 0;
export const G = 1;
export const S = 2;
export const P = 3;

export class Zone {
  private constructor(private readonly d: Float64Array) {}

  /** Nothing known yet, except that the next change comes after the last one. */
  static initial(): Zone {
    const d = new Float64Array(N * N).fill(Infinity);
    for (let i = 0; i < N; i++) d[i * N + i] = 0;
    d[S * N + P] = 0;
    return new Zone(d);
  }

  clone(): Zone {
    return new Zone(this.d.slice());
  }

  /** The bound on x_i - x_j. */
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

  /**
   * A state change happened at P (the zone must be closed): S := P; G := P
   * when it was a grant, or G forgotten when the key became free; then P is
   * the next change, anywhere after this one. Keeps the zone closed.
   */
  changedAtP(holder: 'granted' | 'freed' | 'same'): void {
    this.copyClock(P, S);
    if (holder === 'granted') this.copyClock(P, G);
    else if (holder === 'freed') this.forget(G);
    // P := a fresh point with P >= S only: its tightest bounds are S's.
    const d = this.d;
    for (let i = 0; i < N; i++) d[i * N + P] = d[i * N + S]!;
    for (let j = 0; j < N; j++) d[P * N + j] = Infinity;
    d[P * N + P] = 0;
  }

  /** x_to := x_from (a closed zone stays closed). */
  private copyClock(from: number, to: number): void {
    const d = this.d;
    for (let j = 0; j < N; j++) {
      d[to * N + j] = d[from * N + j]!;
      d[j * N + to] = d[j * N + from]!;
    }
    d[to * N + from] = 0;
    d[from * N + to] = 0;
    d[to * N + to] = 0;
  }

  private forget(clock: number): void {
    const d = this.d;
    for (let j = 0; j < N; j++) {
      d[clock * N + j] = Infinity;
      d[j * N + clock] = Infinity;
    }
    d[clock * N + clock] = 0;
  }

  /** True if every point of `other` is in this zone (both closed). */
  includes(other: Zone): boolean {
    for (let k = 0; k < N * N; k++) if (other.d[k]! > this.d[k]!) return false;
    return true;
  }
}
