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
 * - Unknown extensions matter only while their token holds the key, but
 *   several may take effect. Those with the same token and lease are
 *   interchangeable as acquires are: placed in invocation order, one
 *   candidate per (token, lease).
 */
import type { KeyOp } from './lock-model.js';

export class UnknownPool {
  /** Unknown acquires grouped by lease, and unknown extensions by token and lease, each group in invocation order. */
  private readonly groups: number[][] = [];
  /** The token each group's extensions name (undefined: a group of acquires). */
  private readonly groupToken: Array<bigint | undefined> = [];
  /** How many of each group are placed (always a prefix). */
  private readonly placedCount: number[] = [];
  private readonly groupOf: Int32Array;
  /** The earliest unknown release per token. */
  private readonly releases = new Map<bigint, number>();

  constructor(private readonly ops: readonly KeyOp[]) {
    this.groupOf = new Int32Array(ops.length).fill(-1);
    const byShape = new Map<string, { token: bigint | undefined; members: number[] }>();
    ops.forEach((k, i) => {
      if (k.comp !== Infinity) return;
      const op = k.op;
      if (op.op === 'release') {
        const earliest = this.releases.get(op.token);
        if (earliest === undefined || k.inv < ops[earliest]!.inv) this.releases.set(op.token, i);
        return;
      }
      const token = op.op === 'extend' ? op.token : undefined;
      const shape = `${token ?? '-'}|${k.leaseUs}`;
      const group = byShape.get(shape);
      if (group === undefined) byShape.set(shape, { token, members: [i] });
      else group.members.push(i);
    });
    for (const { token, members } of byShape.values()) {
      members.sort((a, b) => ops[a]!.inv - ops[b]!.inv);
      for (const i of members) this.groupOf[i] = this.groups.length;
      this.groups.push(members);
      this.groupToken.push(token);
      this.placedCount.push(0);
    }
  }

  /**
   * Appends to `out` the unknown operations worth trying now: invoked no
   * later than `limit`, and for a release or an extension, naming the
   * holder's token.
   */
  candidates(holderToken: bigint | undefined, limit: number, out: number[]): void {
    if (holderToken !== undefined) {
      const release = this.releases.get(holderToken);
      if (release !== undefined && this.ops[release]!.inv <= limit) out.push(release);
    }
    this.groups.forEach((group, g) => {
      const token = this.groupToken[g];
      if (token !== undefined && token !== holderToken) return;
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
