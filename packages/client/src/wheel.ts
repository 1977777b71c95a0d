/**
 * The client's deadlines for requests (release and extension windows,
 * re-sends): a hashed wheel of `tickMs` slots, looked at every `tickMs`
 * while it holds any. Nearly every request is answered long before its
 * deadlines, and a deadline cancelled while it waits in the wheel never cost
 * a timer: adding and cancelling one is a few pointer moves.
 *
 * A deadline does not fire late by up to a tick: one tick before it comes
 * (or when it is set that close), it gets a timer of its own for its exact
 * moment. So a deadline fires when a timer of its own would have fired, on
 * the same clock (the simulator's too).
 */
import { after, awaited, now, timing, type Timer } from './timing.js';

/** Ring size, a power of two: 64 slots of 100 ms span 6.4 s; later deadlines wait in the last slot. */
const SLOTS = 64;

/** Something that happens at a deadline. `keepAlive`: the process stays alive until then (someone awaits it). */
export abstract class Deadline {
  /** When it fires (monotonic ms); meaningful while set. */
  due = 0;
  /** The wheel slot (absolute tick number) it waits in; -1 when not in the wheel. */
  slot = -1;
  prev: Deadline | undefined;
  next: Deadline | undefined;
  /** Its own timer, once the deadline is less than a tick away. */
  timer: Timer | undefined;

  constructor(
    readonly wheel: Wheel,
    readonly keepAlive: boolean,
  ) {}

  /** Called once when the deadline comes (not when cancelled or moved first). */
  protected abstract fire(): void;

  /** Sets (or moves) the deadline to `due`; `t` is now. */
  setDeadline(due: number, t = now()): void {
    this.wheel.set(this, due, t);
  }

  cancelDeadline(): void {
    this.wheel.cancel(this);
  }

  /** @internal For the wheel. */
  fireNow(): void {
    this.fire();
  }
}

export class Wheel {
  private readonly tickMs = timing.tickMs;
  /** Slot heads (doubly linked lists through `prev`/`next`). */
  private readonly heads: Array<Deadline | undefined> = new Array<Deadline | undefined>(SLOTS).fill(undefined);
  /** Every slot of a tick number below this one has been looked at. */
  private cursor = 0;
  private size = 0;
  /** Deadlines in the wheel that keep the process alive. */
  private keepingAlive = 0;
  private ticker: Timer | undefined;
  private tickerKeepsAlive = false;
  private nextTickAt = 0;
  private readonly onTick = (): void => {
    this.ticker = undefined;
    const t = now();
    this.advance(t);
    if (this.size > 0) this.arm(t + this.tickMs);
  };

  set(d: Deadline, due: number, t: number): void {
    this.cancel(d);
    d.due = due;
    if (due - t <= this.tickMs) {
      this.armOwnTimer(d, t);
      return;
    }
    // An empty wheel has nothing in the slots before now: the cursor need not walk them.
    if (this.size === 0) this.cursor = Math.max(this.cursor, Math.floor(t / this.tickMs));
    // Filed under the tick at or after its deadline; the tick before that one gives it its own timer.
    const slot = Math.min(Math.max(Math.ceil(due / this.tickMs), this.cursor), this.cursor + SLOTS - 1);
    const i = slot & (SLOTS - 1);
    const head = this.heads[i];
    d.slot = slot;
    d.prev = undefined;
    d.next = head;
    if (head !== undefined) head.prev = d;
    this.heads[i] = d;
    this.size++;
    if (d.keepAlive) this.keepingAlive++;
    if (this.ticker === undefined) this.arm(t + this.tickMs);
    else if (d.keepAlive && !this.tickerKeepsAlive) this.arm(this.nextTickAt);
  }

  cancel(d: Deadline): void {
    if (d.timer !== undefined) {
      d.timer.cancel();
      d.timer = undefined;
    }
    if (d.slot < 0) return;
    const i = d.slot & (SLOTS - 1);
    if (d.prev !== undefined) d.prev.next = d.next;
    else this.heads[i] = d.next;
    if (d.next !== undefined) d.next.prev = d.prev;
    d.slot = -1;
    d.prev = d.next = undefined;
    this.size--;
    if (d.keepAlive) this.keepingAlive--;
  }

  /** Gives every deadline that may come before the next tick its own timer (one already past fires at once). */
  private advance(t: number): void {
    // Up to the slot of deadlines at t + tickMs: the next tick is a tick from now.
    const last = Math.ceil((t + this.tickMs) / this.tickMs);
    for (; this.cursor <= last && this.size > 0; this.cursor++) {
      const i = this.cursor & (SLOTS - 1);
      for (let d = this.heads[i]; d !== undefined; d = this.heads[i]) {
        this.cancel(d);
        // Parked in the last slot because it was further out than the ring spans: filed again.
        if (Math.ceil(d.due / this.tickMs) > this.cursor) this.set(d, d.due, t);
        else this.armOwnTimer(d, t);
      }
    }
  }

  private armOwnTimer(d: Deadline, t: number): void {
    const fire = (): void => {
      d.timer = undefined;
      d.fireNow();
    };
    d.timer = d.keepAlive ? awaited(d.due - t, fire) : after(d.due - t, fire);
  }

  /** The next tick at `at`; it keeps the process alive while a deadline in the wheel does. */
  private arm(at: number): void {
    this.ticker?.cancel();
    this.nextTickAt = at;
    this.tickerKeepsAlive = this.keepingAlive > 0;
    this.ticker = this.tickerKeepsAlive ? awaited(at - now(), this.onTick) : after(at - now(), this.onTick);
  }
}
