/**
 * The linearizability search for one key: Wing & Gong's depth-first search
 * with Lowe's memo of (set of placed operations, model state), in the shape
 * Porcupine uses (a doubly linked list of call and return events that
 * operations are lifted out of and put back into).
 *
 * The calls before the first return in the list are the candidates to place
 * next (an operation cannot come after one that returned before it was
 * invoked); when none of them can be placed, the last choice is undone.
 * Operations of unknown outcome have no return and are not in the list: they
 * never force anything, may stay unplaced (they never took effect), and are
 * offered by an UnknownPool. The search succeeds once every completed
 * operation is placed.
 */
import { holderToken, INITIAL_STATE, KeyFacts, stateKey, step, type KeyOp, type LockState } from './lock-model.js';
import { OpSet, type Snapshot } from './op-set.js';
import { UnknownPool } from './unknowns.js';
import type { Zone } from './zone.js';

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
  // Calls and returns of the completed operations, by time; at equal times
  // calls first (touching intervals count as overlapping).
  const events: Array<{ time: number; op: number; call: boolean }> = [];
  const isUnknown = new Uint8Array(n);
  const bit = new Int32Array(n);
  let completed = 0;
  let unknown = 0;
  for (let i = 0; i < n; i++) {
    const k = ops[i]!;
    if (k.comp === Infinity) {
      isUnknown[i] = 1;
      bit[i] = unknown++;
    } else {
      events.push({ time: k.inv, op: i, call: true }, { time: k.comp, op: i, call: false });
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
  const callEntry = new Int32Array(n).fill(-1);
  const returnEntry = new Int32Array(n).fill(-1);
  for (let e = 1; e < size; e++) {
    const ev = events[e - 1]!;
    entryOp[e] = ev.op;
    entryIsCall[e] = ev.call ? 1 : 0;
    (ev.call ? callEntry : returnEntry)[ev.op] = e;
    prev[e] = e - 1;
    next[e - 1] = e;
  }
  next[size - 1] = -1;

  const unlink = (e: number) => {
    next[prev[e]!] = next[e]!;
    if (next[e]! >= 0) prev[next[e]!] = prev[e]!;
  };
  // Undoes unlink(e); correct because unlinks are undone in reverse order.
  const relink = (e: number) => {
    next[prev[e]!] = e;
    if (next[e]! >= 0) prev[next[e]!] = e;
  };
  const facts = new KeyFacts(ops);
  const unknowns = new UnknownPool(ops);
  let grantsPlaced = 0;
  /** Takes `i` out of the candidates (or puts it back). */
  const place = (i: number, on: boolean) => {
    if (isUnknown[i] === 1) {
      if (on) unknowns.placed(i);
      else unknowns.unplaced(i);
      return;
    }
    if (on) {
      unlink(callEntry[i]!);
      unlink(returnEntry[i]!);
    } else {
      relink(returnEntry[i]!);
      relink(callEntry[i]!);
    }
    if (facts.rank[i]! >= 0) grantsPlaced += on ? 1 : -1;
  };

  const placed = new OpSet(isUnknown, bit);
  /**
   * Lowe's memo, with covering: every continuation of (set, state) is also
   * one of (set', state') when set' has the same completed operations and at
   * most its unknown ones, state' the same holder and last token, and a zone
   * that includes state's (every step is monotone in the zone). Then
   * (set, state) needs no search of its own: set' was searched, or is being.
   */
  const cache = new Map<string, Array<{ snapshot: Snapshot; zone: Zone }>>();
  const firstVisit = (state: LockState): boolean => {
    const key = `${placed.hash()}|${stateKey(state)}`;
    let seen = cache.get(key);
    if (seen === undefined) cache.set(key, (seen = []));
    else for (const s of seen) if (s.zone.includes(state.zone) && placed.coveredBy(s.snapshot)) return false;
    seen.push({ snapshot: placed.snapshot(), zone: state.zone });
    return true;
  };

  /** The first return in the list: the completed operation that must be placed soonest. */
  const mostUrgent = (): number => {
    let e = next[HEAD]!;
    while (entryIsCall[e] === 1) e = next[e]!;
    return entryOp[e]!;
  };
  /**
   * The operations that may be placed next, most urgent first: completed
   * ones whose call comes before the first return in the list (grants only
   * in token order), by completion time; then unknown ones invoked by then.
   * Any order is correct; this one finds the usual linearization with
   * little backtracking, as the operation that must be placed soonest is
   * tried first.
   */
  const candidatesNow = (state: LockState): Int32Array => {
    const calls: number[] = [];
    let e = next[HEAD]!;
    for (; entryIsCall[e] === 1; e = next[e]!) {
      const i = entryOp[e]!;
      if (facts.rank[i]! < 0 || facts.rank[i] === grantsPlaced) calls.push(i);
    }
    calls.sort((a, b) => ops[a]!.comp - ops[b]!.comp || ops[a]!.inv - ops[b]!.inv);
    unknowns.candidates(holderToken(state, ops), ops[entryOp[e]!]!.comp, calls);
    return Int32Array.from(calls);
  };
  /**
   * A completed operation that can no longer be placed in this state (the
   * order so far leads nowhere), or -1. Only operations up to the first
   * return in the list are looked at: those are the urgent ones.
   */
  const hopelessOp = (state: LockState): number => {
    for (let e = next[HEAD]!; ; e = next[e]!) {
      const i = entryOp[e]!;
      if (facts.hopeless(state, ops, i)) return i;
      if (entryIsCall[e] === 0) return -1;
    }
  };

  /** One level of the depth-first search: the candidates there, which one is placed, the state before it. */
  interface Frame {
    readonly candidates: Int32Array;
    readonly pos: number;
    readonly state: LockState;
  }
  const frames: Frame[] = [];
  let remaining = completed;
  let state = INITIAL_STATE;
  let candidates = remaining > 0 ? candidatesNow(state) : new Int32Array(0);
  let pos = 0;
  let steps = 0;
  let deepest: DeepestFailure | undefined;
  let deepestDone = -1;

  while (remaining > 0) {
    steps++;
    if (steps > budget.maxSteps || ((steps & 1023) === 0 && performance.now() > budget.deadline)) {
      return { verdict: 'inconclusive', steps };
    }
    if (pos < candidates.length) {
      const i = candidates[pos]!;
      const after = step(state, ops, i, slackUs);
      if (after !== undefined) {
        placed.add(i);
        if (firstVisit(after)) {
          frames.push({ candidates, pos, state });
          state = after;
          place(i, true);
          if (isUnknown[i] === 0 && --remaining === 0) break;
          candidates = candidatesNow(state);
          // A node from which some operation can never be placed is a dead end at once.
          pos = hopelessOp(state) >= 0 ? candidates.length : 0;
          continue;
        }
        placed.remove(i);
      }
      pos++;
      continue;
    }
    // Every candidate tried: this order cannot go on. Undo its last choice.
    const done = completed - remaining;
    if (done > deepestDone) {
      deepestDone = done;
      const hopeless = hopelessOp(state);
      deepest = { order: frames.map((f) => f.candidates[f.pos]!), state, blocked: hopeless >= 0 ? hopeless : mostUrgent() };
    }
    const frame = frames.pop();
    if (frame === undefined) return { verdict: 'violation', steps, ...deepest! };
    const i = frame.candidates[frame.pos]!;
    state = frame.state;
    place(i, false);
    placed.remove(i);
    if (isUnknown[i] === 0) remaining++;
    candidates = frame.candidates;
    pos = frame.pos + 1;
  }
  return { verdict: 'linearizable', steps };
}
