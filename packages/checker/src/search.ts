/**
 * The linearizability search for one key: Wing & Gong's depth-first search
 * with Lowe's memo of (set of placed operations, model state), in the shape
 * Porcupine uses (a doubly linked list of call and return events that
 * operations are lifted out of and put back into).
 *
 * Walking the list from its head, a call is a candidate to place next; a
 * return whose operation is not placed yet means the current order cannot be
 * extended, so the last choice is undone. Operations of unknown outcome have
 * no return: they never force anything, and may stay unplaced (they never
 * took effect). The search succeeds once every completed operation is placed.
 */
import { INITIAL_STATE, stateKey, step, type KeyOp, type LockState } from './lock-model.js';
import { OpSet, type Snapshot } from './op-set.js';

export interface SearchBudget {
  /** Most loop iterations before giving up (inconclusive). */
  readonly maxSteps: number;
  /** `performance.now()` after which to give up. */
  readonly deadline: number;
}

/** Where the search got furthest before it had to give up on a history. */
export interface DeepestFailure {
  /** The longest consistent order found (indices into the key's ops). */
  readonly order: readonly number[];
  /** The state after that order. */
  readonly state: LockState;
  /** The completed operation that could not be placed next. */
  readonly blocked: number;
}

export type SearchResult =
  | { readonly verdict: 'linearizable'; readonly steps: number }
  | ({ readonly verdict: 'violation'; readonly steps: number } & DeepestFailure)
  | { readonly verdict: 'inconclusive'; readonly steps: number };

const HEAD = 0;

export function searchKey(ops: readonly KeyOp[], slackUs: number, budget: SearchBudget): SearchResult {
  const n = ops.length;
  // Events sorted by time; at equal times calls first (touching intervals count as overlapping).
  const events: Array<{ time: number; op: number; call: boolean }> = [];
  const isUnknown = new Uint8Array(n);
  const bit = new Int32Array(n);
  let completed = 0;
  let unknown = 0;
  for (let i = 0; i < n; i++) {
    const k = ops[i]!;
    events.push({ time: k.inv, op: i, call: true });
    if (k.comp === Infinity) {
      isUnknown[i] = 1;
      bit[i] = unknown++;
    } else {
      events.push({ time: k.comp, op: i, call: false });
      bit[i] = completed++;
    }
  }
  events.sort((a, b) => a.time - b.time || Number(b.call) - Number(a.call) || a.op - b.op);

  // The list: entry 0 is the head; entries 1..E are the events; -1 ends it.
  const size = events.length + 1;
  const entryOp = new Int32Array(size);
  const entryIsCall = new Uint8Array(size);
  const next = new Int32Array(size);
  const prev = new Int32Array(size);
  const returnEntry = new Int32Array(n).fill(-1);
  for (let e = 1; e < size; e++) {
    const ev = events[e - 1]!;
    entryOp[e] = ev.op;
    entryIsCall[e] = ev.call ? 1 : 0;
    if (!ev.call) returnEntry[ev.op] = e;
    prev[e] = e - 1;
    next[e - 1] = e;
  }
  next[size - 1] = -1;

  const lift = (call: number) => {
    next[prev[call]!] = next[call]!;
    if (next[call]! >= 0) prev[next[call]!] = prev[call]!;
    const ret = returnEntry[entryOp[call]!]!;
    if (ret >= 0) {
      next[prev[ret]!] = next[ret]!;
      if (next[ret]! >= 0) prev[next[ret]!] = prev[ret]!;
    }
  };
  // Undoes lift(call); correct because lifts are undone in reverse order.
  const unlift = (call: number) => {
    const ret = returnEntry[entryOp[call]!]!;
    if (ret >= 0) {
      next[prev[ret]!] = ret;
      if (next[ret]! >= 0) prev[next[ret]!] = ret;
    }
    next[prev[call]!] = call;
    if (next[call]! >= 0) prev[next[call]!] = call;
  };

  const placed = new OpSet(isUnknown, bit);
  const cache = new Map<string, Snapshot[]>();
  /** True if (placed, state) was not seen before (and now is). */
  const firstVisit = (state: LockState): boolean => {
    const key = `${placed.hash()}|${stateKey(state)}`;
    const seen = cache.get(key);
    if (seen === undefined) {
      cache.set(key, [placed.snapshot()]);
      return true;
    }
    for (const s of seen) if (placed.equals(s)) return false;
    seen.push(placed.snapshot());
    return true;
  };

  const stackEntry = new Int32Array(n);
  const stackState: LockState[] = [];
  let depth = 0;
  let remaining = completed;
  let state = INITIAL_STATE;
  let entry = next[HEAD]!;
  let steps = 0;
  let deepest: DeepestFailure | undefined;
  let deepestDone = -1;

  while (remaining > 0) {
    steps++;
    if (steps > budget.maxSteps || ((steps & 1023) === 0 && performance.now() > budget.deadline)) {
      return { verdict: 'inconclusive', steps };
    }
    if (entryIsCall[entry] === 1) {
      const i = entryOp[entry]!;
      const after = step(state, ops, i, slackUs);
      if (after !== undefined) {
        placed.add(i);
        if (firstVisit(after)) {
          stackEntry[depth] = entry;
          stackState[depth] = state;
          depth++;
          state = after;
          lift(entry);
          if (isUnknown[i] === 0) remaining--;
          entry = next[HEAD]!;
          continue;
        }
        placed.remove(i);
      }
      entry = next[entry]!;
    } else {
      // A return whose operation is not placed: this order cannot go on.
      const done = completed - remaining;
      if (done > deepestDone) {
        deepestDone = done;
        deepest = { order: Array.from(stackEntry.subarray(0, depth), (e) => entryOp[e]!), state, blocked: entryOp[entry]! };
      }
      if (depth === 0) return { verdict: 'violation', steps, ...deepest! };
      depth--;
      const call = stackEntry[depth]!;
      const i = entryOp[call]!;
      state = stackState[depth]!;
      unlift(call);
      placed.remove(i);
      if (isUnknown[i] === 0) remaining++;
      entry = next[call]!;
    }
  }
  return { verdict: 'linearizable', steps };
}
