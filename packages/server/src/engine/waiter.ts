/**
 * Waiting acquires and the FIFO queue of one key. A waiter belongs to the
 * connection (owner) that sent it; it is filed both in its key's queue and,
 * by its wait deadline, in the engine's timer wheel.
 */
import type { Token } from '../state-machine/commands.js';
import type { TimerNode } from './timer-wheel.js';

/** The connection a waiter belongs to; told of the outcome once. */
export interface WaiterOwner {
  /** The named client identity of the connection (its grants carry it; only it may release them). */
  readonly identity?: string | undefined;
  /** The connection's remote address (for an operator looking at a queue). */
  readonly remote?: string | undefined;
  /**
   * The waiter was granted `token`. Return false if the owner cannot take it
   * any more (its connection is gone): the engine then releases that grant at
   * once, so no ghost lock is left behind.
   */
  granted(waiter: Waiter, token: Token): boolean;
  /** The wait ran out (or the node stopped serving): nothing was granted. */
  timedOut(waiter: Waiter): void;
}

export class Waiter implements TimerNode {
  due = 0;
  wheelTick = -1;
  wheelPrev: TimerNode | null = null;
  wheelNext: TimerNode | null = null;
  queuePrev: Waiter | null = null;
  queueNext: Waiter | null = null;
  queued = false;

  get wheelLane(): 1 {
    return 1;
  }

  constructor(
    readonly owner: WaiterOwner,
    readonly key: string,
    readonly leaseMs: number,
    /** When it was queued (clock ms). */
    readonly since: number,
    /** The owner's own bookkeeping for this request (e.g. its reply slot). */
    public tag: unknown,
  ) {}
}

/** Doubly linked FIFO: O(1) push, pop and removal from the middle. */
export class WaitQueue {
  head: Waiter | null = null;
  private tail: Waiter | null = null;
  length = 0;

  push(w: Waiter): void {
    w.queuePrev = this.tail;
    w.queueNext = null;
    if (this.tail !== null) this.tail.queueNext = w;
    else this.head = w;
    this.tail = w;
    w.queued = true;
    this.length++;
  }

  remove(w: Waiter): void {
    if (!w.queued) return;
    if (w.queuePrev !== null) w.queuePrev.queueNext = w.queueNext;
    else this.head = w.queueNext;
    if (w.queueNext !== null) w.queueNext.queuePrev = w.queuePrev;
    else this.tail = w.queuePrev;
    w.queuePrev = null;
    w.queueNext = null;
    w.queued = false;
    this.length--;
  }
}
