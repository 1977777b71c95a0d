/**
 * Connections a listener holds before they proved who they are (a TLS
 * handshake in progress, no HELLO yet), so that an idle flood cannot fill
 * the listener: each must authenticate within a deadline, at most
 * `perAddress` of them per source address and `total` in all, and when
 * either is full the oldest pending connection (of that address, else of
 * all) that has sent nothing is closed to make room; only when every one has
 * spoken, the oldest of them. A real peer speaks (its TLS ClientHello) the
 * moment it connects and authenticates within milliseconds, so an idle
 * flood, however fast it reconnects, never pushes it out: an attacker has to
 * speak, and then race the handshake. (Oldest first alone lost the race to
 * a flood that reconnected at once: a restarting standby took 0.2-7 s to link.)
 * Authenticated connections leave the pool: they never compete with these.
 */
import type { Clock, TimerHandle } from '../seams/clock.js';
import type { AcceptedConnection } from '../seams/transport.js';

export interface PendingLimits {
  readonly total: number;
  readonly perAddress: number;
  /** Milliseconds from accept to authenticated, at most. */
  readonly deadlineMs: number;
}

interface Pending {
  readonly connection: AcceptedConnection;
  readonly address: string;
  readonly timer: TimerHandle;
}

export class PendingPool {
  /** In arrival order (a Map iterates in insertion order): the first is the oldest. */
  private readonly pending = new Map<string, Pending>();
  /** Connections closed to make room, and past their deadline (for /metrics and tests). */
  shed = 0;
  expired = 0;

  constructor(
    private readonly clock: Clock,
    private readonly limits: PendingLimits,
  ) {}

  get size(): number {
    return this.pending.size;
  }

  /** The transport's admit hook: admits every connection, closing the oldest pending ones when full. */
  readonly admit = (remote: string | undefined, connection: AcceptedConnection): (() => void) => {
    const address = remote ?? '?';
    const id = `${address} ${connection.remotePort ?? '?'}`;
    const ofAddress = [...this.pending.entries()].filter(([, p]) => p.address === address);
    if (ofAddress.length >= this.limits.perAddress) this.evict(this.victim(ofAddress));
    else if (this.pending.size >= this.limits.total) this.evict(this.victim([...this.pending.entries()]));
    const timer = this.clock.schedule(this.limits.deadlineMs, () => {
      if (this.pending.get(id)?.connection !== connection) return;
      this.expired++;
      this.drop(id);
    });
    this.pending.set(id, { connection, address, timer });
    return () => {
      if (this.pending.get(id)?.connection !== connection) return;
      timer.cancel();
      this.pending.delete(id);
    };
  };

  /** The connection from `address`:`port` proved itself: it leaves the pool (and its deadline). */
  authenticated(address: string | undefined, port: number | undefined): void {
    const id = `${address ?? '?'} ${port ?? '?'}`;
    const p = this.pending.get(id);
    if (p === undefined) return;
    p.timer.cancel();
    this.pending.delete(id);
  }

  /** Of `candidates` (oldest first), the oldest that has sent nothing, else the oldest. */
  private victim(candidates: Array<[string, Pending]>): string {
    return (candidates.find(([, p]) => p.connection.spoke?.() !== true) ?? candidates[0]!)[0];
  }

  private evict(id: string): void {
    this.shed++;
    this.drop(id);
  }

  private drop(id: string): void {
    const p = this.pending.get(id);
    if (p === undefined) return;
    p.timer.cancel();
    this.pending.delete(id);
    p.connection.close();
  }

  /** Closes every pending connection (the listener stops). */
  closeAll(): void {
    for (const id of [...this.pending.keys()]) this.drop(id);
  }
}
