/**
 * How far each peer's wall clock is from ours, estimated the way NTP does
 * from the heartbeats both sides send anyway. Each heartbeat carries the
 * sender's wall time and echoes the monotonic stamp of the last heartbeat it
 * received from the recipient, with how long it held it. The recipient then
 * knows the round trip (its own monotonic time, so its wall clock stepping
 * changes nothing) and the offset to within half of it:
 *
 *   round trip = (now - echoed stamp) - hold
 *   offset     = peer's wall at sending - (our wall now - round trip / 2)
 *
 * Of the recent samples the one with the shortest round trip wins (NTP's
 * clock filter): a heartbeat queued behind a burst of replication says
 * little. Pure: times come in as arguments.
 */

/** Samples kept per peer. */
const WINDOW = 8;
/** Samples older than this are forgotten (clocks step; a crystal drifts). */
const MAX_AGE_MS = 30_000;
/** A round trip longer than this tells too little to keep. */
export const MAX_ROUND_TRIP_MS = 2_000;

/** Monotonic and wall time of one moment on this node. */
export interface Now {
  /** Monotonic ms. */
  readonly mono: number;
  /** Wall ms since the Unix epoch. */
  readonly wall: number;
}

export interface OffsetEstimate {
  /** The peer's clock minus ours, ms (positive: the peer is ahead). */
  offsetMs: number;
  /** The estimate is within this of the truth (half the round trip). */
  readonly errorMs: number;
  /** Monotonic time of the sample. */
  readonly at: number;
}

export class ClockOffsets {
  private readonly samples = new Map<string, OffsetEstimate[]>();

  /**
   * A heartbeat from `peer` stamped `peerWall` on its clock, echoing our
   * heartbeat stamped `echoMono` (our monotonic ms), which it held `holdMs`
   * before answering; it reached us at `now`.
   */
  sample(peer: string, peerWall: number, echoMono: number, holdMs: number, now: Now): void {
    const roundTrip = now.mono - echoMono - holdMs;
    if (!(roundTrip >= 0 && roundTrip <= MAX_ROUND_TRIP_MS) || holdMs < 0) return;
    const list = this.samples.get(peer) ?? [];
    list.push({ offsetMs: peerWall - (now.wall - roundTrip / 2), errorMs: roundTrip / 2, at: now.mono });
    if (list.length > WINDOW) list.shift();
    this.samples.set(peer, list);
  }

  /** The best recent estimate for `peer`, or undefined when there is none. */
  estimate(peer: string, now: number): OffsetEstimate | undefined {
    const list = this.samples.get(peer)?.filter((s) => now - s.at <= MAX_AGE_MS);
    if (list === undefined || list.length === 0) return undefined;
    return list.reduce((best, s) => (s.errorMs < best.errorMs || (s.errorMs === best.errorMs && s.at > best.at) ? s : best));
  }

  /** The last estimate for `peer` however old (what a node knew of a peer that has gone). */
  last(peer: string): OffsetEstimate | undefined {
    const list = this.samples.get(peer);
    if (list === undefined || list.length === 0) return undefined;
    return list.reduce((best, s) => (s.errorMs < best.errorMs || (s.errorMs === best.errorMs && s.at > best.at) ? s : best));
  }

  /** True when `peer`'s clock is certainly more than `boundMs` from ours (the error counted in its favour). */
  beyond(peer: string, boundMs: number, now: number): boolean {
    const e = this.estimate(peer, now);
    return e !== undefined && Math.abs(e.offsetMs) - e.errorMs > boundMs;
  }

  /** Our own wall clock stepped by `deltaMs`: every peer is that much less ahead of us now. */
  shift(deltaMs: number): void {
    for (const [peer, list] of this.samples) this.samples.set(peer, list.map((s) => ({ ...s, offsetMs: s.offsetMs - deltaMs })));
  }
}
