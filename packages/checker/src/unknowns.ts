/**
 * The operations of unknown outcome of one key, as candidates for the
 * search. They stay possible forever (they may have taken effect at any time
 * after their invocation), so offering each of them at every step would make
 * every step cost as much as there are unknown operations. Two symmetries
 * keep the offer small:
 *
 * - Unknown acquires with the same lease are interchangeable, except that
 *   an earlier invocation allows more: placing the earliest one unplaced
 *   covers placing any other (swap their roles in any continuation). So each
 *   lease's acquires are placed in invocation order, one candidate per lease.
 * - An unknown release matters only while its token holds the key, and then
 *   only once (the token never holds it again): the earliest one per token.
 */
import type { KeyOp } from './lock-model.js';

export class UnknownPool {
  /** Unknown acquires grouped by lease, each group in invocation order. */
  private readonly groups: number[][] = [];
  /** How many of each group are placed (always a prefix). */
  private readonly placedCount: number[] = [];
  private readonly groupOf: Int32Array;
  /** The earliest unknown release per token. */
  private readonly releases = new Map<bigint, number>();

  constructor(private readonly ops: readonly KeyOp[]) {
    this.groupOf = new Int32Array(ops.length).fill(-1);
    const byLease = new Map<number, number[]>();
    ops.forEach((k, i) => {
      if (k.comp !== Infinity) return;
      const op = k.op;
      if (op.op === 'acquire') {
        const group = byLease.get(k.leaseUs);
        if (group === undefined) byLease.set(k.leaseUs, [i]);
        else group.push(i);
      } else {
        const earliest = this.releases.get(op.token);
        if (earliest === undefined || k.inv < ops[earliest]!.inv) this.releases.set(op.token, i);
      }
    });
    for (const group of byLease.values()) {
      group.sort((a, b) => ops[a]!.inv - ops[b]!.inv);
      for (const i of group) this.groupOf[i] = this.groups.length;
      this.groups.push(group);
      this.placedCount.push(0);
    }
  }

  /**
   * Appends to `out` the unknown operations worth trying now: invoked no
   * later than `limit`, and for a release, naming the holder's token.
   */
  candidates(holderToken: bigint | undefined, limit: number, out: number[]): void {
    if (holderToken !== undefined) {
      const release = this.releases.get(holderToken);
      if (release !== undefined && this.ops[release]!.inv <= limit) out.push(release);
    }
    this.groups.forEach((group, g) => {
      const next = group[this.placedCount[g]!];
      if (next !== undefined && this.ops[next]!.inv <= limit) out.push(next);
    });
  }

  placed(i: number): void {
    const g = this.groupOf[i]!;
    if (g >= 0) this.placedCount[g]!++;
  }

  unplaced(i: number): void {
    const g = this.groupOf[i]!;
    if (g >= 0) this.placedCount[g]!--;
  }
}
