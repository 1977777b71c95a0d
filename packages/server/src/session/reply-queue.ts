/**
 * The replies of one connection, in the order the protocol promises, with no
 * socket in sight (a test drives it with plain calls):
 *
 * - Acquire replies of one key leave in request order: a reply decided while
 *   an earlier acquire of its key is still queued waits behind it (its slot).
 * - Replies are gathered into one string and handed to `write` once per
 *   batch (`flush`), so a pipelining client costs one write per read.
 * - Raft leader: a batch waits until the log index it depends on commits
 *   (the commit gate); when the node stops leading, what did not commit is
 *   dropped.
 * - Grants whose replies never left (held by order or by the gate when the
 *   connection closes) are known by key and token, so they can be released:
 *   no ghost locks.
 * - Priority active with sync-standbys: a grant whose reply the gate has held
 *   past its hold limit (its wait, at least the failover timeout, never past
 *   its lease) is answered `T` instead and released (expireHeld): a client is
 *   never told it holds a lock whose lease is already over.
 *
 * Replies are formatted with the protocol codec as they are decided; the
 * grants among them are also kept as (key, token) until they are written.
 */
import { formatGranted, formatKeyReply } from '@ticketing/protocol';
import type { Waiter } from '../engine/waiter.js';
import type { Token } from '../state-machine/commands.js';

/** How an acquire was answered. */
export type AcquireAnswer = 'A' | 'T' | 'B';

/** An acquire whose reply is not written yet, in its key's line. */
export interface AcquireSlot {
  readonly key: string;
  /** Undefined while its waiter is queued. */
  answer: AcquireAnswer | undefined;
  token: Token;
  waiter: Waiter | undefined;
  /** The log index its answer depends on (see CommitGate.gateIndex; 0 when none or not decided). */
  index: number;
  /** Clock time its wait runs out (for a grant's hold limit). */
  readonly waitEnd: number;
}

/** The Raft leader's commit positions, as a connection sees them. */
export interface CommitGate {
  /** True while replies wait for commits (a Raft leader). */
  holding(): boolean;
  /** The log index a reply written now depends on; undefined when replies go out at once. */
  gateIndex(): number | undefined;
  /** The commit index replies are released up to. */
  committedIndex(): number;
  /** This queue holds replies waiting for a commit: call releaseCommitted() when it advances. */
  awaitCommit(): void;
}

/** An acquire's reply gathered while the gate holds replies. */
interface HeldAcquire {
  readonly key: string;
  /** Its place among the batch's parts. */
  readonly part: number;
  /** A grant's token (undefined: a T or B). */
  readonly token: Token | undefined;
  /** When a held grant is answered T instead (undefined: never). */
  readonly deadline: number | undefined;
  /** Answered already (its T went out early). */
  gone?: boolean;
}

interface Gated {
  readonly parts: string[];
  readonly index: number;
  /** Acquire replies among `parts`; undefined when none. */
  readonly acquires: HeldAcquire[] | undefined;
}

/** A decided slot may carry its grant's hold deadline until it is emitted. */
type SlotWithDeadline = AcquireSlot & { deadline?: number | undefined };

export class ReplyQueue {
  /** Acquires not answered yet (written): queued, or decided but held back by order. */
  unanswered = 0;
  /**
   * Replies gathered for the next write, joined once at `flush`. (Appending
   * to one string made a rope node per reply and V8 flattened the rope again
   * when it was written.)
   */
  private out: string[] = [];
  /**
   * Acquire replies in `out`, kept only while the gate holds replies: without
   * a gate, `out` is written at the end of every handler (the gate changes
   * only between handlers), so no grant can be left in it.
   */
  private outAcquires: HeldAcquire[] = [];
  /**
   * Keys with unwritten acquire replies: their slots in request order. Made
   * on the first slot: most connections never need one, and an empty Map is
   * about 170 bytes of every idle connection (target: <= 5 KB per connection).
   */
  private slots: Map<string, AcquireSlot[]> | undefined;
  /** Batches waiting for the log index they depend on to commit, in order. */
  private gated: Gated[] = [];
  /** A reply was dropped: nothing more goes out (see silence). */
  private silenced = false;

  constructor(
    /** Where replies go (the socket); called once per released batch. */
    private readonly write: (text: string) => void,
    private readonly gate: CommitGate,
  ) {}

  /** A reply that needs no ordering (H, P, R, N, M, E). */
  push(text: string): void {
    if (!this.silenced) this.out.push(text);
  }

  /**
   * An acquire answered at once; behind an earlier unanswered acquire of
   * `key` if there is one. `deadline`: when a grant held by the gate is
   * answered T instead (see expireHeld).
   */
  answered(key: string, answer: AcquireAnswer, token: Token, deadline?: number): void {
    if (this.slots?.has(key) === true) this.addSlot({ key, answer, token, waiter: undefined, index: this.gate.gateIndex() ?? 0, waitEnd: 0, deadline });
    else this.emit(key, answer, token, deadline);
  }

  /** An acquire that waits in the engine's queue until `waitEnd` at most: its reply keeps its place. */
  queued(key: string, waiter: Waiter, waitEnd = Infinity): AcquireSlot {
    const slot: AcquireSlot = { key, answer: undefined, token: 0n, waiter, index: 0, waitEnd };
    this.addSlot(slot);
    return slot;
  }

  /** The queued acquire of `slot` got its answer: write what is now at the front of its key's line. */
  decide(slot: AcquireSlot, answer: AcquireAnswer, token: Token, deadline?: number): void {
    slot.answer = answer;
    slot.token = token;
    slot.waiter = undefined;
    slot.index = this.gate.gateIndex() ?? 0;
    (slot as SlotWithDeadline).deadline = deadline;
    this.writeDecided(slot.key);
  }

  /** Takes every still-queued acquire out (the connection is closing); decided replies are kept. */
  dropWaiters(cancel: (waiter: Waiter) => void): void {
    const slots = this.slots;
    if (slots === undefined) return;
    for (const [key, line] of [...slots]) {
      const kept = line.filter((slot) => {
        if (slot.waiter === undefined) return true;
        cancel(slot.waiter);
        this.unanswered--;
        return false;
      });
      if (kept.length === 0) slots.delete(key);
      else {
        slots.set(key, kept);
        this.writeDecided(key);
      }
    }
  }

  /** Hands what was gathered to `write`, or to the commit gate (Raft leader). */
  flush(): void {
    if (this.out.length === 0 || this.silenced) return;
    const gate = this.gate.gateIndex();
    if (gate === undefined && this.gated.length === 0) {
      const text = this.out.length === 1 ? this.out[0]! : this.out.join('');
      this.out = [];
      if (this.outAcquires.length > 0) this.outAcquires = []; // (only if the gate went away mid-handler)
      return this.write(text);
    }
    const acquires = this.outAcquires.length === 0 ? undefined : this.outAcquires;
    if (acquires !== undefined) this.outAcquires = [];
    this.gated.push({ parts: this.out, index: gate ?? 0, acquires });
    this.out = [];
    this.releaseCommitted();
    if (this.gated.length > 0) this.gate.awaitCommit();
  }

  /** Writes the held-back batches whose log index has committed. */
  releaseCommitted(): void {
    const commit = this.gate.committedIndex();
    let n = 0;
    while (n < this.gated.length && this.gated[n]!.index <= commit) this.write(this.gated[n++]!.parts.join(''));
    if (n > 0) this.gated.splice(0, n);
  }

  /**
   * Held grants whose deadline has passed at `now` are answered `T` at once
   * (ahead of the batches still held: replies of other keys may come in any
   * order) and `release`d; held T and B replies (nothing granted, nothing to
   * acknowledge) go out at once too. A reply waits while an earlier grant of
   * its key is still held, so replies of one key keep their order.
   */
  expireHeld(now: number, release: (key: string, token: Token) => void): void {
    let early = '';
    const blocked = new Set<string>();
    for (const batch of this.gated) {
      for (const a of batch.acquires ?? []) {
        if (a.gone === true || blocked.has(a.key)) continue;
        if (a.token === undefined) {
          early += batch.parts[a.part];
        } else if (a.deadline !== undefined && a.deadline <= now) {
          early += formatKeyReply('T', a.key);
          release(a.key, a.token);
        } else {
          blocked.add(a.key);
          continue;
        }
        a.gone = true;
        batch.parts[a.part] = '';
      }
    }
    if (early !== '' && !this.silenced) this.write(early);
  }

  /**
   * The node stops leading: batches that committed still go out; the others
   * are dropped (this node cannot know whether they will commit, so the
   * client must treat those requests as indeterminate). An answer decided on
   * uncommitted state but still held behind a queued acquire of its key is
   * lost too: a T that saw a grant the next leader never commits would
   * otherwise leave after the step-down as if it had been true.
   */
  dropUncommitted(): boolean {
    this.releaseCommitted();
    const commit = this.gate.committedIndex();
    let dropped = this.gated.length > 0;
    for (const line of this.slots?.values() ?? []) for (const slot of line) if (slot.answer !== undefined && slot.index > commit) dropped = true;
    this.gated = [];
    return dropped;
  }

  /** Nothing more is written, whatever is decided later (see Session.dropUncommitted). */
  silence(): void {
    this.silenced = true;
    this.out = [];
  }

  get hasGated(): boolean {
    return this.gated.length > 0;
  }

  /**
   * The connection is gone: calls `release` for every grant whose reply never
   * left (gathered, held back by order, or waiting for a commit), then forgets
   * everything.
   */
  abandon(release: (key: string, token: Token) => void): void {
    for (const list of [this.outAcquires, ...this.gated.map((g) => g.acquires)]) {
      for (const a of list ?? []) if (a.token !== undefined && a.gone !== true) release(a.key, a.token);
    }
    for (const line of this.slots?.values() ?? []) for (const slot of line) if (slot.answer === 'A') release(slot.key, slot.token);
    this.out = [];
    this.outAcquires = [];
    this.gated = [];
    this.slots = undefined;
  }

  private emit(key: string, answer: AcquireAnswer, token: Token, deadline?: number): void {
    if (this.gate.holding()) this.outAcquires.push({ key, part: this.out.length, token: answer === 'A' ? token : undefined, deadline: answer === 'A' ? deadline : undefined });
    this.out.push(answer === 'A' ? formatGranted(token, key) : formatKeyReply(answer, key));
  }

  private addSlot(slot: AcquireSlot & { deadline?: number | undefined }): void {
    this.slots ??= new Map();
    const line = this.slots.get(slot.key);
    if (line === undefined) this.slots.set(slot.key, [slot]);
    else line.push(slot);
    this.unanswered++;
  }

  /** Moves the decided replies at the front of `key`'s line to the output. */
  private writeDecided(key: string): void {
    const line = this.slots?.get(key);
    if (line === undefined) return;
    let n = 0;
    for (; n < line.length; n++) {
      const slot = line[n]!;
      if (slot.answer === undefined) break;
      this.emit(key, slot.answer, slot.token, (slot as SlotWithDeadline).deadline);
    }
    if (n === 0) return;
    this.unanswered -= n;
    if (n === line.length) this.slots!.delete(key);
    else line.splice(0, n);
  }
}
