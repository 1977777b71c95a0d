/**
 * A quick test for the commonest violation, run before the search: two
 * grants in a row (in token order, which is the only order they can take
 * effect in) where nothing could have freed the key between them. The
 * search would find it too, but only after ruling out every order of every
 * other operation around them; this costs one sort.
 *
 * The key passes from grant A to the next grant B only through a release
 * of A's token (answered R, or unknown) taking effect between them, or A's
 * lease ending, no earlier than A's invocation + lease. If B completed
 * before that and no release of A's token overlaps [A's invocation, B's
 * completion], no linearization exists. An extension of A's token (answered
 * X, or unknown) in that span may have shortened A's lease: such a pair is
 * left to the search.
 */
import { ms, type Explanation } from './explain.js';
import type { KeyOp } from './lock-model.js';

/** The second grant of the first such pair, and why; undefined when there is none. */
export function findDoubleGrant(ops: readonly KeyOp[]): { readonly blocked: number; readonly why: Explanation } | undefined {
  const grants: Array<{ i: number; token: bigint }> = [];
  const frees = new Map<bigint, KeyOp[]>();
  ops.forEach((k, i) => {
    const op = k.op;
    if (op.op === 'acquire' && op.outcome === 'granted') grants.push({ i, token: op.token });
    if ((op.op === 'release' && op.outcome !== 'not-held') || (op.op === 'extend' && op.outcome !== 'not-extended')) {
      const list = frees.get(op.token);
      if (list === undefined) frees.set(op.token, [k]);
      else list.push(k);
    }
  });
  grants.sort((x, y) => (x.token < y.token ? -1 : x.token > y.token ? 1 : 0));
  for (let n = 1; n < grants.length; n++) {
    const a = grants[n - 1]!;
    const b = grants[n]!;
    if (a.token === b.token) continue; // a duplicate token: reported as such
    const first = ops[a.i]!;
    const second = ops[b.i]!;
    // B done before A began is a token out of order, not a double grant: the search names it.
    if (second.comp < first.inv || second.comp >= first.inv + first.leaseUs) continue;
    if ((frees.get(a.token) ?? []).some((r) => r.inv <= second.comp && r.comp >= first.inv)) continue;
    const message =
      `granted while token ${a.token} still held the key: no release of token ${a.token} could have come between, ` +
      `and its lease cannot have ended before ${ms(first.inv + first.leaseUs)}, but this grant completed at ${ms(second.comp)}`;
    return { blocked: b.i, why: { kind: 'double-grant', message, related: [a.i] } };
  }
  return undefined;
}
