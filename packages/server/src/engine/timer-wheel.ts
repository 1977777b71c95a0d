/**
 * A hashed timing wheel: one structure for millions of deadlines, O(1) to
 * add and to remove, driven by whoever calls `advance(now)`.
 *
 * Deadlines are rounded UP to the next tick, so a node never fires before its
 * deadline (PROTOCOL.md: `T` no earlier than the wait). Nodes are intrusive
 * (their links live in the node) so removing one costs nothing extra.
 *
 * Within one tick, nodes of lane 0 fire before nodes of lane 1: the engine
 * files lease ends in lane 0 and wait ends in lane 1, so a waiter whose wait
 * ends when the lease before it ends gets the lock rather than `T`.
 */

export interface TimerNode {
  /** 0 fires before 1 within a tick. */
  readonly wheelLane: 0 | 1;
  /** Deadline, in the clock's milliseconds. */
  due: number;
  /** Absolute tick this node is filed under, or -1 when not scheduled. */
  wheelTick: number;
  wheelPrev: TimerNode | null;
  wheelNext: TimerNode | null;
}

export class TimerWheel<T extends TimerNode> {
  private readonly heads: Array<T | null>;
  private readonly tails: Array<T | null>;
  private readonly mask: number;
  /** Every tick below this one has been processed. */
  private cursor: number;
  private count = 0;

  /**
   * @param tickMs resolution: a node fires at most one tick (plus the
   *   driver's own delay) after its deadline.
   * @param slotCount ring size, a power of two; deadlines further out than
   *   slotCount ticks are parked in the last slot and re-filed when it comes.
   */
  constructor(
    readonly tickMs: number,
    slotCount: number,
    startMs: number,
  ) {
    if ((slotCount & (slotCount - 1)) !== 0) throw new Error('slotCount must be a power of two');
    this.heads = new Array<T | null>(slotCount).fill(null);
    this.tails = new Array<T | null>(slotCount).fill(null);
    this.mask = slotCount - 1;
    this.cursor = Math.floor(startMs / tickMs);
  }

  get size(): number {
    return this.count;
  }

  add(node: T, due: number): void {
    if (node.wheelTick >= 0) this.remove(node);
    node.due = due;
    let tick = Math.ceil(due / this.tickMs);
    if (tick < this.cursor) tick = this.cursor;
    const last = this.cursor + this.mask;
    if (tick > last) tick = last;
    const idx = tick & this.mask;
    node.wheelTick = tick;
    if (node.wheelLane === 0) {
      const head = this.heads[idx] ?? null;
      node.wheelPrev = null;
      node.wheelNext = head;
      if (head !== null) head.wheelPrev = node;
      else this.tails[idx] = node;
      this.heads[idx] = node;
    } else {
      const tail = this.tails[idx] ?? null;
      node.wheelPrev = tail;
      node.wheelNext = null;
      if (tail !== null) tail.wheelNext = node;
      else this.heads[idx] = node;
      this.tails[idx] = node;
    }
    this.count++;
  }

  remove(node: T): void {
    if (node.wheelTick < 0) return;
    const idx = node.wheelTick & this.mask;
    const prev = node.wheelPrev;
    const next = node.wheelNext;
    if (prev !== null) prev.wheelNext = next;
    else this.heads[idx] = next as T | null;
    if (next !== null) next.wheelPrev = prev;
    else this.tails[idx] = prev as T | null;
    node.wheelTick = -1;
    node.wheelPrev = null;
    node.wheelNext = null;
    this.count--;
  }

  /**
   * Fires (removes, then calls `fire` on) every node whose deadline is at or
   * before `now`, earliest tick first. `fire` may add and remove nodes.
   * Returns how many slots it looked at: the work it did besides firing.
   */
  advance(now: number, fire: (node: T) => void): number {
    const target = Math.floor(now / this.tickMs);
    let looked = 0;
    if (target - this.cursor > this.mask) looked += this.leap(target, now, fire);
    while (this.cursor <= target) {
      looked++;
      const idx = this.cursor & this.mask;
      let node = this.heads[idx] ?? null;
      while (node !== null) {
        this.remove(node);
        // Every node filed under a tick <= target is due, except one parked
        // in the last slot because it was too far out: that one is re-filed
        // under a later tick (never this slot again).
        if (node.due <= now) fire(node);
        else this.add(node, node.due);
        node = this.heads[idx] ?? null;
      }
      if (this.count === 0) {
        this.cursor = target + 1;
        break;
      }
      this.cursor++;
    }
    return looked;
  }

  /**
   * The wheel was not advanced for longer than the ring spans (a node that
   * stood by for days and now serves again, a process stopped for minutes):
   * every slot is looked at once, instead of every tick since (a year of
   * 10 ms ticks took 6.5 s). Due nodes fire in the order advancing tick by
   * tick would have fired them, and, as there, a node an earlier firing
   * removed or filed again is not fired from here (a lease end that hands
   * the lock to a waiter removes that waiter's own wait end: firing it too
   * crashed the node, simulation seed 38).
   */
  private leap(target: number, now: number, fire: (node: T) => void): number {
    const due: Array<{ node: T; tick: number }> = [];
    const later: T[] = [];
    for (let idx = 0; idx <= this.mask; idx++) {
      for (let node = this.heads[idx] ?? null; node !== null; node = node.wheelNext as T | null) {
        if (node.due <= now) due.push({ node, tick: node.wheelTick });
        else later.push(node);
      }
    }
    this.cursor = target;
    for (const node of later) this.add(node, node.due);
    // By tick, lane 0 first, then as filed (a stable sort of the slots' order).
    const tickOf = (n: T) => Math.ceil(n.due / this.tickMs);
    due.sort((a, b) => tickOf(a.node) - tickOf(b.node) || a.node.wheelLane - b.node.wheelLane);
    for (const { node, tick } of due) {
      if (node.wheelTick !== tick) continue;
      this.remove(node);
      fire(node);
    }
    return this.mask + 1;
  }
}
