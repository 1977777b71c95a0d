/**
 * The priority cluster's role protocol as one pure, deterministic object, in
 * the way raft-core.ts is Raft's: every role fact lives here, it is driven by
 * `tick(now)` and the peer events the shell reports (heartbeats, hand-off
 * messages, links), and each call returns a Ready: what to persist first
 * (the epoch of a promotion), what to do (serve, follow, hold clients, hand
 * off), what to send, and what to log. No clock, no I/O: times are
 * arguments, and what the data plane knows (the replicated table's position,
 * the stream's followers) comes in as facts. priority-mode.ts does the I/O.
 *
 * The rules (docs/cluster.md states them for operators):
 *
 * - **Epochs.** Every activation takes an epoch: a token of the hybrid clock
 *   (hlc.ts), so it is above every epoch and token this node has heard of,
 *   durable through the data directory's token mark, and derived from the
 *   clock without one. A table carries the epoch of the activation it comes
 *   from and its position in that activation's stream.
 * - **Dominance.** Tables are ordered by (established, epoch, position): an
 *   established table (one that descends from a replicated one, or that a
 *   standby has confirmed) beats one a node started empty and alone; then
 *   the newer epoch wins; within one epoch, the longer stream. When two
 *   actives meet the dominated one steps back and resynchronises from the
 *   other; priority comes back by the ordinary hand-off.
 * - **Promotion** needs: no active that dominates this node's table (it is
 *   followed instead), every peer heard from or known gone (silent for the
 *   failover timeout of this node's own running time, or its port refused
 *   us), no peer that refuses our link (it is alive, and may be serving on
 *   another configuration), no peer that still hears the active we lost, no
 *   peer with a better table (or an equal one and a higher priority), clocks
 *   within the bound, and this node's clock past the last tokens the lost
 *   active could have issued.
 * - **Pauses.** A tick that comes much later than it should (SIGSTOP, a long
 *   GC, a frozen VM, an OS suspend: sinceTick) means peers may have acted
 *   meanwhile: an active stops granting until every peer has answered a
 *   heartbeat sent after it resumed, or is gone; silence during the pause
 *   counts for nothing.
 */
import type { PeerInfo } from '../peers/members.js';
import type { Token } from '../state-machine/commands.js';
import { ClockOffsets, type Now } from './clock-offsets.js';
import { nextToken, tokenWallMs } from './hlc.js';
import type { DeclineReason, Heartbeat, PeerRole } from './peer-protocol.js';

export type { Now } from './clock-offsets.js';

export interface RoleOptions {
  readonly self: PeerInfo;
  /** Every other member, in priority order. */
  readonly others: readonly PeerInfo[];
  readonly heartbeatMs: number;
  readonly failoverTimeoutMs: number;
  /** Tokens this node issued or heard of before it started (its data directory's mark): never its own clock, which its heartbeats would tell its peers as a token. */
  readonly floor: Token;
  /**
   * The peers (in order) this node's data directory last served with, when
   * they differ from its list now: it promotes only once every node of its
   * new list answers (member-record.ts). Undefined: nothing changed.
   */
  readonly previousMembers?: readonly string[];
  /** Record the peers list once every node of it has answered (nothing recorded yet, or it changed). */
  readonly recordMembers?: boolean;
}

/** A lock table's place in the cluster's history (see Dominance in the header). */
export interface Claim {
  readonly epoch: Token;
  readonly established: boolean;
  readonly position: number;
}

/** What the data plane knows, passed with every call. */
export interface DataFacts {
  /** A standby's replicated table (or the last complete one, while a new snapshot arrives); undefined: none. */
  readonly replica: (Claim & { readonly complete: boolean }) | undefined;
  /** An active's stream: its position, and what each follower has confirmed. */
  readonly stream: StreamFacts | undefined;
  /** The next token of the table this node holds (served or replicated). */
  readonly tableNext: Token | undefined;
  /** The peer's stream to us (our inbound link from it) is open. */
  inbound(peer: string): boolean;
}

export interface StreamFacts {
  readonly position: number;
  /** Followers that confirmed their snapshot. */
  readonly confirmed: number;
  follower(peer: string): { readonly streaming: boolean; readonly lagMs: number } | undefined;
}

export type RoleAction =
  /** Persist `epoch` (reserve it as a token), then serve with the replicated table (or a new one). */
  | { readonly type: 'promote'; readonly epoch: Token; readonly established: boolean }
  /** Stop serving if serving; follow `leader`'s stream of `epoch` (a fresh replica: FOLLOW is in `send`). */
  | { readonly type: 'follow'; readonly leader: PeerInfo; readonly epoch: Token }
  /** Stop serving; clients are redirected to `redirect` ('-': none known). */
  | { readonly type: 'stand'; readonly redirect: string }
  | { readonly type: 'hold-clients' }
  | { readonly type: 'release-clients' }
  /**
   * Pause clients, freeze deadlines, send the rest of the stream and HANDOFF
   * to `to`; `serial` names this hand-off (sent where the link speaks
   * version 3, so that the successor's DECLINED can name it).
   */
  | { readonly type: 'hand-off'; readonly to: PeerInfo; readonly epoch: Token; readonly serial: number }
  /** The hand-off ended: `taken` (the successor serves) or not (serve on, or stop if exiting). */
  | { readonly type: 'hand-off-ended'; readonly taken: boolean }
  /** Start the replica over: a fresh snapshot (FOLLOW is in `send`). */
  | { readonly type: 'resync' }
  /** Every node of the new peers list answered: record it as this node's members. */
  | { readonly type: 'confirm-members' }
  /** Dial `peer` now: what we know of it is old and it blocks a promotion. */
  | { readonly type: 'redial'; readonly peer: string };

export type RoleMessage =
  | Heartbeat
  | { readonly type: 'follow'; readonly epoch: Token }
  | { readonly type: 'taken'; readonly epoch: Token; readonly nextToken: Token }
  /** This node will not take over from hand-off `serial` of `epoch` (peer protocol 3: the shell sends it only on a link at 3). */
  | { readonly type: 'declined'; readonly epoch: Token; readonly serial: number; readonly reason: DeclineReason };

export interface LogLine {
  readonly level: 'debug' | 'info' | 'warn' | 'error';
  readonly msg: string;
  readonly fields: Record<string, unknown>;
}

export interface Ready {
  readonly actions: RoleAction[];
  readonly send: Array<{ readonly to: string; readonly message: RoleMessage }>;
  readonly log: LogLine[];
  /** Call tick() again at this monotonic time (a wait ends between heartbeats). */
  wakeAt?: number;
}

/** What /status shows of each peer. */
export interface RolePeerView {
  readonly name: string;
  /** reachable: heard within the failover timeout; gone: silent that long or its port refused us; refusing: alive but refuses our link. */
  readonly link: 'reachable' | 'gone' | 'unknown' | 'refusing';
  readonly role: PeerRole | undefined;
  readonly refusing: string | undefined;
  readonly clockOffsetMs: number | undefined;
  readonly clockErrorMs: number | undefined;
  readonly clockBeyondBound: boolean;
}

type State =
  | { readonly role: 'starting' }
  | { readonly role: 'standby'; readonly leader: PeerInfo; readonly epoch: Token; readonly since: number; askedAt: number }
  | { readonly role: 'candidate'; readonly since: number; readonly lost: Lost | undefined }
  | { readonly role: 'active'; readonly epoch: Token; established: boolean; suspectSince: number | undefined; handOff: HandOff | undefined }
  | { readonly role: 'stopping' };

/** The active a standby lost, and from when its clock allows it to take over. */
interface Lost {
  readonly peer: PeerInfo;
  readonly epoch: Token;
  readonly notBefore: number;
}

interface HandOff {
  readonly to: PeerInfo;
  readonly since: number;
  readonly exitAfter: boolean;
  /** Names this hand-off in the HANDOFF (version 3) and in the successor's DECLINED. */
  readonly serial: number;
  /** Peers that declined an earlier hand-off of this same stop: not asked again. */
  readonly declined: readonly string[];
}

interface PeerState {
  readonly info: PeerInfo;
  hb: Heartbeat | undefined;
  /** When `hb` came. */
  hbAt: number;
  heardAt: number;
  /** When our dial to it was last refused (ECONNREFUSED: nothing listens, its process is gone). */
  connRefusedAt: number;
  /** It answered our dial and refused the link (another configuration or peer token). */
  refusing: { at: number; reason: string } | undefined;
  /** The stamp of its last heartbeat and when it came (echoed back for clock offsets). */
  stamp: { mono: number; at: number } | undefined;
  /** Since when its heartbeats say it could not promote (undefined: they say it could). */
  ineligibleSince: number | undefined;
}

/**
 * Longest an active waits for its successor's TAKEN before it goes on
 * serving (or stops, at SIGTERM). A successor on a version-3 link says
 * DECLINED when it will not take over, and the active moves on at once.
 */
export const HANDOFF_TIMEOUT_MS = 2_000;
/**
 * A refusal mark lasts this long without being refreshed (refusing peers are
 * re-dialled every 5 s); our dial refused outright or a link that comes up
 * clears it at once.
 */
const REFUSAL_TTL_MS = 15_000;
/** Heartbeat intervals of silence from the active after which a standby holds client requests. */
const QUIET_HEARTBEATS = 2;
/** A hold lasts at most this many failover timeouts, then clients are redirected. */
const HOLD_TIMEOUTS = 2;
/** A jump of wall minus monotonic time this large between two events is a step of the wall clock (not drift). */
const STEP_MS = 50;

/** Total order of tables: true when `a` is strictly better than `b` (undefined: no table). */
export function dominates(a: Claim | undefined, b: Claim | undefined): boolean {
  if (a === undefined) return false;
  if (b === undefined) return true;
  if (a.established !== b.established) return a.established;
  if (a.epoch !== b.epoch) return a.epoch > b.epoch;
  return a.position > b.position;
}

function claimOf(hb: Heartbeat): Claim | undefined {
  return hb.epoch === 0n ? undefined : { epoch: hb.epoch, established: hb.established, position: hb.position };
}

function max(a: Token, b: Token | undefined): Token {
  return b !== undefined && b > a ? b : a;
}

export class RoleMachine {
  private state: State = { role: 'starting' };
  private readonly peers = new Map<string, PeerState>();
  readonly offsets = new ClockOffsets();
  /** One above the highest token this node has heard of anywhere. */
  private highest: Token;
  private lastTick: number;
  /** Wall minus monotonic time at the last tick (sinceTick). */
  private tickWallBase: number;
  private readonly startedAt: number;
  /** Silence before this (our start, or the end of a pause of ours) says nothing about a peer. */
  private observingSince: number;
  private holding = false;
  /** Since when the active this node follows (or lost) has been quiet. */
  private quietSince: number | undefined;
  /** The last reason a promotion was blocked, so each new reason is logged once. */
  private blocked: string | undefined;
  /** Hand-offs started, for their serials. */
  private handOffs = 0;
  /** A peer that declined a hand-back is not asked again before this time (monotonic ms), by name. */
  private readonly handBackAfter = new Map<string, number>();
  /** Since when this node could promote, as its heartbeats say (undefined: it could not at the last event). */
  private eligibleSince: number | undefined;
  /** Peers whose clocks were beyond the bound at the last tick (logged when that changes). */
  private beyond = new Set<string>();
  /** Wall minus monotonic time at the last event: a jump in it is a step of our own wall clock. */
  private wallBase: number;
  /** Wall clock at the last event. */
  private wallNow: number;
  /** See RoleOptions.previousMembers; cleared once the new list is confirmed. */
  private unconfirmed: readonly string[] | undefined;
  private toRecord: boolean;
  private readonly T: number;
  /** Clocks may differ by this much (docs/cluster.md: half the failover timeout). */
  readonly clockBoundMs: number;
  /** How far a node's tokens may run ahead of its clock (the data directory's reservation, hlc.ts). */
  private readonly reservationMs: number;
  /** A tick this late means this node was paused or starved: peers may have promoted meanwhile. */
  private readonly pauseMs: number;

  constructor(
    private readonly o: RoleOptions,
    now: Now,
  ) {
    this.T = o.failoverTimeoutMs;
    this.clockBoundMs = this.T / 2;
    this.reservationMs = this.T / 4;
    this.pauseMs = this.T - o.heartbeatMs;
    this.highest = o.floor;
    this.lastTick = now.mono;
    this.startedAt = now.mono;
    this.observingSince = now.mono;
    this.wallBase = now.wall - now.mono;
    this.tickWallBase = this.wallBase;
    this.wallNow = now.wall;
    this.unconfirmed = o.previousMembers;
    this.toRecord = o.recordMembers === true || o.previousMembers !== undefined;
    for (const info of o.others) {
      this.peers.set(info.name, { info, hb: undefined, hbAt: -Infinity, heardAt: -Infinity, connRefusedAt: -Infinity, refusing: undefined, stamp: undefined, ineligibleSince: undefined });
    }
  }

  // --- what the shell reads ---

  get role(): PeerRole {
    return this.state.role;
  }

  /** The epoch this node serves in (undefined unless active). */
  get epoch(): Token | undefined {
    return this.state.role === 'active' ? this.state.epoch : undefined;
  }

  /** Active on a table that a standby confirmed or that descends from a replicated one (undefined unless active). */
  get tableConfirmed(): boolean | undefined {
    return this.state.role === 'active' ? this.state.established : undefined;
  }

  /** Serving clients: active, not handing off. */
  get serving(): boolean {
    return this.state.role === 'active' && this.state.handOff === undefined;
  }

  /** The active this standby follows. */
  get leader(): PeerInfo | undefined {
    return this.state.role === 'standby' ? this.state.leader : undefined;
  }

  /** The epoch of the stream this standby follows. */
  get followedEpoch(): Token | undefined {
    return this.state.role === 'standby' ? this.state.epoch : undefined;
  }

  /** Where clients go instead of here (undefined while this node serves). */
  redirect(): string | undefined {
    if (this.serving) return undefined;
    const st = this.state;
    if (st.role === 'active' && st.handOff !== undefined) return st.handOff.to.clientAddress;
    // A candidate sends clients (once it stops holding them) where the active was: others may still hear it.
    if (st.role === 'candidate') return st.lost?.peer.clientAddress ?? '-';
    return this.leader?.clientAddress ?? '-';
  }

  /** One above every token heard of: the next grant and the next epoch go above it. */
  get highestToken(): Token {
    return this.highest;
  }

  /** Why this node does not promote now (undefined: it would, or the question does not arise). */
  get blockedBy(): string | undefined {
    return this.blocked;
  }

  /**
   * Asked before every grant. 'tick': the last tick is so long ago that
   * this node may have been paused; run a tick first (it decides).
   */
  grantCheck(now: Now): 'yes' | 'no' | 'tick' {
    if (this.state.role !== 'active' || this.state.handOff !== undefined || this.state.suspectSince !== undefined) return 'no';
    return this.sinceTick(now) > this.pauseMs ? 'tick' : 'yes';
  }

  /**
   * Time since the last tick. A SIGSTOP or a frozen VM shows on the monotonic clock; an OS suspend
   * (suspend to RAM, a suspended VM) does not: CLOCK_MONOTONIC stops with the machine, and only the
   * wall clock runs on, a forward jump of wall against monotonic time. A forward step of the wall
   * clock by NTP looks the same and is taken for a pause too: that costs one round of heartbeats.
   */
  private sinceTick(now: Now): number {
    return now.mono - this.lastTick + Math.max(0, now.wall - now.mono - this.tickWallBase);
  }

  /** Tokens the data plane saw (replicated grants, snapshots): the next grant or epoch goes above them. */
  inherit(next: Token): void {
    if (next > this.highest) this.highest = next;
  }

  peerViews(now: number): RolePeerView[] {
    return [...this.peers.values()].map((p) => {
      const e = this.offsets.estimate(p.info.name, now);
      return {
        name: p.info.name,
        link: this.linkOf(p, now),
        role: p.hb?.role,
        refusing: this.refusingNow(p, now) ? p.refusing!.reason : undefined,
        clockOffsetMs: e?.offsetMs,
        clockErrorMs: e?.errorMs,
        clockBeyondBound: this.offsets.beyond(p.info.name, this.clockBoundMs, now),
      };
    });
  }

  // --- events ---

  tick(now: Now, facts: DataFacts): Ready {
    const out = newReady();
    const gap = this.sinceTick(now);
    this.lastTick = now.mono;
    this.tickWallBase = now.wall - now.mono;
    this.watchOwnClock(now, out);
    if (gap > this.pauseMs) {
      this.observingSince = now.mono;
      const st = this.state;
      log(out, 'warn', 'this node was paused or starved: silence meanwhile counts for nothing', { gapMs: Math.round(gap), role: st.role });
      if (st.role === 'active' && st.handOff === undefined && this.o.others.length > 0) {
        st.suspectSince = now.mono;
        log(out, 'warn', 'active: checking with every peer before granting again (they may have promoted meanwhile)', {});
        this.hold(out, true);
      }
    }
    this.checkClocks(now, out);
    this.evaluate(now, facts, out);
    this.broadcast(now, facts, out);
    return out;
  }

  heartbeat(peer: string, hb: Heartbeat, now: Now, facts: DataFacts): Ready {
    const out = newReady();
    const p = this.peers.get(peer);
    if (p === undefined) return out;
    this.watchOwnClock(now, out);
    p.hb = hb;
    p.hbAt = now.mono;
    p.heardAt = now.mono;
    p.stamp = { mono: hb.mono, at: now.mono };
    if (hb.eligible) p.ineligibleSince = undefined;
    else p.ineligibleSince ??= now.mono;
    if (hb.echo !== undefined) this.offsets.sample(peer, hb.wall, hb.echo.mono, hb.echo.holdMs, now);
    this.inherit(hb.nextToken);
    this.inherit(hb.epoch + 1n);
    const st = this.state;
    // The successor's TAKEN may be lost; its heartbeat in a newer epoch says the same.
    if (st.role === 'active' && st.handOff?.to.name === peer && hb.role === 'active' && hb.epoch > st.epoch) {
      this.handedOff(st, hb.epoch, now, facts, out);
    }
    this.evaluate(now, facts, out);
    return out;
  }

  /** Our link to `peer` came up (send it a heartbeat now), went down, or its stream to us (re)started or ended. */
  link(peer: string, event: 'outbound-up' | 'outbound-down' | 'inbound-up' | 'inbound-down', now: Now, facts: DataFacts): Ready {
    const out = newReady();
    this.watchOwnClock(now, out);
    const p = this.peers.get(peer);
    if (p === undefined) return out;
    if (event === 'outbound-up') {
      p.refusing = undefined;
      // It accepts our dial now: an earlier refusal says nothing any more (it restarted).
      p.connRefusedAt = -Infinity;
      out.send.push({ to: peer, message: this.heartbeatFor(p, now, facts) });
      const st = this.state;
      if (st.role === 'standby' && st.leader.name === peer && facts.replica?.complete !== true) this.askToFollow(st, now, out);
    } else if (event === 'inbound-up') {
      // A new stream from it, maybe from a new process: what it said before may no longer hold.
      p.hb = undefined;
      p.heardAt = now.mono;
      const st = this.state;
      if (st.role === 'standby' && st.leader.name === peer) {
        out.actions.push({ type: 'resync' });
        this.askToFollow(st, now, out);
      }
    }
    this.evaluate(now, facts, out);
    return out;
  }

  /** Our dial to `peer` was refused outright: nothing listens on its peer port, its process is gone. */
  connectRefused(peer: string, now: Now, facts: DataFacts): Ready {
    const out = newReady();
    this.watchOwnClock(now, out);
    const p = this.peers.get(peer);
    if (p === undefined) return out;
    p.connRefusedAt = now.mono;
    if (p.refusing !== undefined) log(out, 'info', 'a peer that refused our link is gone', { peer });
    p.refusing = undefined;
    this.evaluate(now, facts, out);
    return out;
  }

  /** Our dial reached `peer`'s process and it refused the link (another configuration, another peer token). */
  linkRefused(peer: string, reason: string, now: Now, facts: DataFacts): Ready {
    const out = newReady();
    this.watchOwnClock(now, out);
    const p = this.peers.get(peer);
    if (p === undefined) return out;
    if (p.refusing === undefined) {
      log(out, 'error', 'a peer is running but refuses our link: this node will not promote past it until it is fixed or gone', { peer, reason });
    }
    p.refusing = { at: now.mono, reason };
    this.evaluate(now, facts, out);
    return out;
  }

  /**
   * The active we follow hands over: take over if we hold its whole stream.
   * `serial` came with a version-3 HANDOFF: then a refusal is said back
   * (DECLINED), so that the active moves on at once; a version-2 active
   * (undefined) cannot read it and waits out its timeout.
   */
  handoff(peer: string, epoch: Token, position: number, serial: number | undefined, now: Now, facts: DataFacts): Ready {
    const out = newReady();
    this.watchOwnClock(now, out);
    const st = this.state;
    const decline = (reason: DeclineReason) => {
      if (serial !== undefined) out.send.push({ to: peer, message: { type: 'declined', epoch, serial, reason } });
    };
    if (st.role !== 'standby' || st.leader.name !== peer || st.epoch !== epoch) {
      // Not a standby of that activation: it never takes over from this hand-off.
      decline('not-following');
      return out;
    }
    const r = facts.replica;
    const refuse = (why: string) => log(out, 'error', `refusing a hand-off: ${why}`, { from: peer, position, applied: r?.position });
    if (r === undefined || !r.complete || r.epoch !== epoch || r.position !== position) {
      refuse('this node has not applied the whole stream');
      decline('behind');
    } else if (!this.eligible(now.mono)) {
      refuse(this.ineligible(now.mono)!);
      decline('ineligible');
    } else {
      const next = this.promote(now, facts, out, `hand-off from ${peer}`);
      out.send.push({ to: peer, message: { type: 'taken', epoch: this.epoch!, nextToken: next } });
    }
    this.broadcast(now, facts, out);
    return out;
  }

  /**
   * The successor of hand-off `serial` says it will not take over (version
   * 3's DECLINED). Only an answer to the hand-off under way counts (its
   * successor, epoch and serial): a DECLINED of an earlier one, arriving
   * late, must not end a later one the successor may yet take. The active
   * then does at once what the timeout would have done, except that a stop
   * first tries the next standby that receives the stream; a declined
   * hand-back is not tried again for HANDOFF_TIMEOUT_MS (the pace the
   * timeout kept).
   */
  declined(peer: string, epoch: Token, serial: number, reason: DeclineReason, now: Now, facts: DataFacts): Ready {
    const out = newReady();
    this.watchOwnClock(now, out);
    const st = this.state;
    const h = st.role === 'active' ? st.handOff : undefined;
    if (st.role !== 'active' || h === undefined || h.to.name !== peer || st.epoch !== epoch || h.serial !== serial) {
      log(out, 'debug', 'a DECLINED for no hand-off under way: ignored', { from: peer, epoch: String(epoch), serial });
      return out;
    }
    log(out, 'info', 'the successor declined the hand-off', { successor: peer, reason, exitAfter: h.exitAfter });
    if (h.exitAfter) {
      const declined = [...h.declined, peer];
      const next = this.successor(now, facts, declined);
      if (next !== undefined) {
        this.startHandOff(st, next, true, now, out, declined);
        return out;
      }
      log(out, 'warn', 'no other standby receives the stream: stopping without a hand-off', {});
      st.handOff = undefined;
      out.actions.push({ type: 'hand-off-ended', taken: false });
      this.stopNow(now, facts, out);
      return out;
    }
    st.handOff = undefined;
    this.handBackAfter.set(peer, now.mono + HANDOFF_TIMEOUT_MS);
    out.actions.push({ type: 'hand-off-ended', taken: false });
    return out;
  }

  /** The successor says it serves now, in `epoch`. */
  taken(peer: string, epoch: Token, next: Token, now: Now, facts: DataFacts): Ready {
    const out = newReady();
    this.watchOwnClock(now, out);
    this.inherit(next);
    const st = this.state;
    if (st.role === 'active' && st.handOff?.to.name === peer) this.handedOff(st, epoch, now, facts, out);
    this.broadcast(now, facts, out);
    return out;
  }

  /**
   * Graceful stop: an active hands off to the best standby that receives
   * its stream (a `hand-off-ended` action follows), anything else just
   * stops. Returns false in `handingOff` when there is nothing to wait for.
   */
  stop(now: Now, facts: DataFacts): Ready & { readonly handingOff: boolean } {
    const out = newReady();
    const st = this.state;
    if (st.role === 'active' && st.handOff === undefined) {
      const successor = this.successor(now, facts, []);
      if (successor !== undefined) {
        this.startHandOff(st, successor, true, now, out, []);
        return { ...out, handingOff: true };
      }
      log(out, 'warn', 'no standby receives the stream: stopping without a hand-off', {});
    }
    if (st.role === 'active' && st.handOff !== undefined) {
      // A hand-back under way: let it finish, then stop.
      st.handOff = { ...st.handOff, exitAfter: true };
      return { ...out, handingOff: true };
    }
    this.stopNow(now, facts, out);
    return { ...out, handingOff: false };
  }

  /** The best placed standby that receives our stream, but those in `except`. */
  private successor(now: Now, facts: DataFacts, except: readonly string[]): PeerInfo | undefined {
    return this.o.others.find((p) => !except.includes(p.name) && this.linkOf(this.peers.get(p.name)!, now.mono) === 'reachable' && facts.stream?.follower(p.name)?.streaming === true);
  }

  // --- decisions ---

  private evaluate(now: Now, facts: DataFacts, out: Ready): void {
    // Heard means linked, and a link means the same cluster identity: every node of the new list agrees.
    if (this.toRecord && this.o.others.length > 0 && [...this.peers.values()].every((p) => this.linkOf(p, now.mono) === 'reachable')) {
      log(out, 'info', 'every node of the peers list answers with the same list: recording it', { before: this.unconfirmed?.join(','), now: this.o.others.map((p) => p.name).join(',') });
      this.unconfirmed = undefined;
      this.toRecord = false;
      out.actions.push({ type: 'confirm-members' });
    }
    if (!this.eligible(now.mono)) this.eligibleSince = undefined;
    else this.eligibleSince ??= now.mono;
    const st = this.state;
    switch (st.role) {
      case 'stopping':
        return;
      case 'active':
        return this.evaluateActive(st, now, facts, out);
      case 'standby':
        return this.evaluateStandby(st, now, facts, out);
      case 'starting':
      case 'candidate':
        return this.evaluateCandidate(now, facts, out);
    }
  }

  private evaluateActive(st: State & { role: 'active' }, now: Now, facts: DataFacts, out: Ready): void {
    if (st.handOff !== undefined) {
      if (now.mono - st.handOff.since >= HANDOFF_TIMEOUT_MS) {
        log(out, 'warn', 'hand-off not confirmed in time', { successor: st.handOff.to.name, exitAfter: st.handOff.exitAfter });
        const exit = st.handOff.exitAfter;
        st.handOff = undefined;
        out.actions.push({ type: 'hand-off-ended', taken: false });
        if (exit) this.stopNow(now, facts, out);
      }
      return;
    }
    const mine = this.myClaim(facts);
    const winner = this.bestActive(now.mono);
    if (winner !== undefined && !dominates(mine, claimOf(winner.hb!))) {
      log(out, 'warn', 'another node is active with a newer table: stepping back to standby; grants made here since the split are dropped', {
        winner: winner.info.name,
        epoch: String(st.epoch),
        winnerEpoch: String(winner.hb!.epoch),
      });
      return this.follow(winner, winner.hb!.epoch, now, facts, out);
    }
    if (!st.established && (facts.stream?.confirmed ?? 0) > 0) st.established = true;
    // Serving alone on a table nobody confirmed, and a live node refuses our link: it may be serving
    // the cluster's real table, on the configuration we lack. Step back (mistakes keep a node out).
    const refusing = [...this.peers.values()].find((p) => this.refusingNow(p, now.mono));
    if (!st.established && refusing !== undefined) {
      log(out, 'warn', 'active alone on a table no standby confirmed, and a peer that refuses our link is alive: stepping back; grants made here are dropped', {
        peer: refusing.info.name,
        reason: refusing.refusing!.reason,
      });
      this.state = { role: 'starting' };
      this.holding = false; // standing redirects every client
      out.actions.push({ type: 'stand', redirect: '-' });
      this.broadcast(now, facts, out);
      return;
    }
    if (st.suspectSince !== undefined) {
      const since = st.suspectSince;
      const answered = [...this.peers.values()].every((p) => {
        const link = this.linkOf(p, now.mono);
        if (link === 'unknown') return false;
        return link !== 'reachable' || (p.hb?.echo !== undefined && p.hb.echo.mono >= since);
      });
      if (!answered) return;
      st.suspectSince = undefined;
      log(out, 'info', 'active: every peer answered after the pause; granting again', {});
      this.hold(out, false);
    }
    // Hand back to a returning higher-priority node once it keeps up with the stream.
    const back = this.o.others.find((info) => {
      if (info.index > this.o.self.index) return false;
      if (now.mono < (this.handBackAfter.get(info.name) ?? -Infinity)) return false;
      const p = this.peers.get(info.name)!;
      const hb = p.hb;
      const f = facts.stream?.follower(info.name);
      return (
        this.linkOf(p, now.mono) === 'reachable' &&
        hb?.role === 'standby' &&
        hb.following === this.o.self.name &&
        hb.epoch === st.epoch &&
        hb.eligible &&
        f?.streaming === true &&
        f.lagMs <= 2 * this.o.heartbeatMs &&
        !this.offsets.beyond(info.name, this.clockBoundMs, now.mono)
      );
    });
    if (back !== undefined) this.startHandOff(st, back, false, now, out, []);
  }

  private evaluateStandby(st: State & { role: 'standby' }, now: Now, facts: DataFacts, out: Ready): void {
    const p = this.peers.get(st.leader.name)!;
    const lost = this.leaderLost(st, p, now.mono);
    if (lost !== undefined) {
      const evidence = lost.at;
      const theta = this.offsets.last(st.leader.name);
      // Its last tokens may run ahead of our clock by its offset (or the bound, not knowing it) plus its reservation.
      const ahead = theta === undefined ? this.clockBoundMs : Math.max(0, theta.offsetMs + theta.errorMs);
      const notBefore = evidence + ahead + this.reservationMs;
      log(out, 'warn', 'the active node is gone: looking for the best placed node to take over', { active: st.leader.name, why: lost.why, waitMs: Math.max(0, Math.round(notBefore - now.mono)) });
      this.quietSince ??= now.mono;
      this.state = { role: 'candidate', since: now.mono, lost: { peer: st.leader, epoch: st.epoch, notBefore } };
      return this.evaluateCandidate(now, facts, out);
    }
    // A newer active elsewhere (a hand-off, or ours was a stale one): follow that one.
    const winner = this.bestActive(now.mono);
    if (winner !== undefined && winner !== p && dominates(claimOf(winner.hb!), { epoch: st.epoch, established: true, position: Number.MAX_SAFE_INTEGER })) {
      return this.follow(winner, winner.hb!.epoch, now, facts, out);
    }
    // A FOLLOW (or its snapshot) lost with a link that broke meanwhile: ask again rather than wait forever.
    const r = facts.replica;
    if ((r === undefined || !r.complete || r.epoch !== st.epoch) && now.mono - st.askedAt > this.T) {
      out.actions.push({ type: 'resync' });
      this.askToFollow(st, now, out);
    }
    const quiet = !facts.inbound(st.leader.name) || now.mono - p.heardAt > QUIET_HEARTBEATS * this.o.heartbeatMs;
    if (!quiet) this.quietSince = undefined;
    else this.quietSince ??= now.mono;
    this.hold(out, quiet && now.mono - this.quietSince! <= HOLD_TIMEOUTS * this.T, { active: st.leader.name });
  }

  private evaluateCandidate(now: Now, facts: DataFacts, out: Ready): void {
    const mine = this.myClaim(facts);
    const winner = this.bestActive(now.mono);
    // An active whose table is not behind ours (our own active back from a silence, or a newer one): follow it.
    if (winner !== undefined && !dominates(mine, claimOf(winner.hb!))) return this.follow(winner, winner.hb!.epoch, now, facts, out);
    const block = this.promotionBlock(now.mono, mine);
    if (block === undefined) {
      this.blocked = undefined;
      this.promote(now, facts, out, this.state.role === 'starting' ? 'no active node, and this node is the best placed' : 'the active node is gone');
      return;
    }
    if (block.reason !== this.blocked) {
      log(out, block.loud ? 'warn' : 'debug', `not promoting: ${block.reason}`, {});
      this.blocked = block.reason;
    }
    if (block.redial !== undefined) out.actions.push({ type: 'redial', peer: block.redial });
    if (block.wakeAt !== undefined) out.wakeAt = block.wakeAt;
    const st = this.state;
    if (st.role === 'candidate' && st.lost !== undefined) {
      this.quietSince ??= st.since;
      this.hold(out, now.mono - this.quietSince <= HOLD_TIMEOUTS * this.T, { active: st.lost.peer.name });
    }
  }

  /** Why this node may not promote now; undefined when it may. */
  private promotionBlock(now: number, mine: Claim | undefined): { reason: string; loud: boolean; redial?: string; wakeAt?: number } | undefined {
    const st = this.state;
    const lost = st.role === 'candidate' ? st.lost : undefined;
    const reasons: Array<{ reason: string; loud: boolean; redial?: string }> = [];
    // Peers started at the same moment refuse our first dials (nothing listens yet): a failover timeout
    // of discovery first, unless every peer has already been heard.
    const discovering = st.role === 'starting' && now - this.startedAt < this.T;
    if (discovering && [...this.peers.values()].some((p) => this.linkOf(p, now) !== 'reachable')) {
      return { reason: 'looking for an active node', loud: false, wakeAt: this.startedAt + this.T };
    }
    for (const p of this.peers.values()) {
      const name = p.info.name;
      const link = this.linkOf(p, now);
      if (link === 'refusing') {
        // Evidence that is getting old is refreshed before it blocks a failover for long.
        const stale = now - p.refusing!.at > this.T;
        return { reason: `${name} is running but refuses our link (${p.refusing!.reason}); it may be serving with another configuration`, loud: true, ...(stale ? { redial: name } : {}) };
      }
      if (link === 'unknown') return { reason: `waiting to hear from ${name}`, loud: false };
      if (link === 'gone') continue;
      const hb = p.hb!;
      if (hb.role === 'active' || hb.role === 'stopping') continue; // an active we outrank steps back to us
      const leader = hb.following;
      if (hb.role === 'standby' && leader !== undefined && leader !== this.o.self.name && hb.heard.includes(leader) && !this.deadByRefusal(leader)) {
        if (!(mine !== undefined && mine.established && mine.epoch > hb.epoch)) return { reason: `${name} still hears the active node ${leader}`, loud: false };
      }
      const theirs = claimOf(hb);
      if (dominates(theirs, mine)) return { reason: `${name} holds a newer copy of the table`, loud: false };
      // A peer placed as well with priority goes first, unless it has said for a while that it cannot
      // while this node could: a block both shared (a third node's clock) lifts for both at once, and
      // its old "cannot" is no news of now (three nodes promoted together: sim 5-node priority seed 2051).
      const cannotSince = p.ineligibleSince === undefined ? undefined : Math.max(p.ineligibleSince, this.eligibleSince ?? now);
      const mayGoFirst = cannotSince === undefined || now - cannotSince < this.T;
      if (!dominates(mine, theirs) && p.info.index < this.o.self.index && mayGoFirst) reasons.push({ reason: `${name} is placed as well and has priority`, loud: false });
      // Until its clock is measured (one heartbeat round trip), nobody knows whether it is within the bound.
      if (this.offsets.estimate(name, now) === undefined) reasons.push({ reason: `measuring the clock of ${name}`, loud: false });
    }
    // This node's own block first: it is what an operator must fix.
    const why = this.ineligible(now);
    if (why !== undefined) return { reason: why, loud: true };
    if (reasons.length > 0) return reasons[0];
    const last = lost === undefined ? undefined : this.offsets.last(lost.peer.name);
    if (lost !== undefined && last !== undefined && Math.abs(last.offsetMs) - last.errorMs > this.clockBoundMs) {
      return {
        reason: `the clock of ${lost.peer.name} was ${Math.round(last.offsetMs)} ms from ours when last heard, beyond the ${this.clockBoundMs} ms the tokens allow: not taking over from it until the clocks agree (fix them: NTP)`,
        loud: true,
      };
    }
    if (lost !== undefined && now < lost.notBefore) return { reason: `waiting for this node's clock to pass ${lost.peer.name}'s last tokens`, loud: false, wakeAt: lost.notBefore };
    return undefined;
  }

  /** Why this node could not promote whatever the others say (clocks, refusals, its floor); undefined: it could. */
  private ineligible(now: number): string | undefined {
    if (this.unconfirmed !== undefined) {
      return `this node last served with the peers ${this.unconfirmed.join(',')}, and its peers list has changed since: it promotes only once every node of the new list answers with the same list (a membership change done on every node), or once the record is removed from its data directory`;
    }
    for (const p of this.peers.values()) {
      if (this.refusingNow(p, now)) return `${p.info.name} refuses our link`;
    }
    for (const p of this.peers.values()) {
      if (this.linkOf(p, now) === 'reachable' && this.offsets.beyond(p.info.name, this.clockBoundMs, now)) {
        const e = this.offsets.estimate(p.info.name, now)!;
        return `the clock of ${p.info.name} is ${Math.round(e.offsetMs)} ms from ours, beyond the ${this.clockBoundMs} ms the tokens allow; fix the clocks (NTP)`;
      }
    }
    // Behind the tokens it knows of (its data directory's mark, its peers' tokens) by more than the
    // bound allows: its clock stepped back, or a fast peer dragged the tokens ahead. Only peers that can
    // all be heard vouch for every token issued since; alone, its tokens could fall below a dead peer's.
    const behind = tokenWallMs(this.highest) - this.wallNow - this.reservationMs;
    if (behind > this.clockBoundMs && [...this.peers.values()].some((p) => this.linkOf(p, now) !== 'reachable')) {
      return `this node's clock is ${Math.round(behind)} ms behind the tokens it knows of (its data directory's, its peers'): it stepped back, or a peer's fast clock dragged them ahead; waiting until every peer can be heard, or the clock catches up`;
    }
    return undefined;
  }

  private eligible(now: number): boolean {
    return this.state.role !== 'stopping' && this.ineligible(now) === undefined;
  }

  /** Whether (and how) the active `st` follows is lost. */
  private leaderLost(st: State & { role: 'standby' }, p: PeerState, now: number): { why: string; at: number } | undefined {
    if (this.refusedDial(p)) return { why: 'its peer port refused us: its process is gone', at: p.connRefusedAt };
    const link = this.linkOf(p, now);
    if (link === 'gone') return { why: `silent for ${this.T} ms`, at: p.heardAt };
    // Only what it said since we chose to follow it (it said 'active' then).
    const hb = p.hbAt >= st.since ? p.hb : undefined;
    if (hb !== undefined && !(hb.role === 'active' && hb.epoch === st.epoch)) {
      return { why: hb.role === 'starting' ? 'it restarted and lost its table' : `it is ${hb.role} now`, at: now };
    }
    return undefined;
  }

  private promote(now: Now, facts: DataFacts, out: Ready, why: string): Token {
    const base = this.myClaim(facts);
    const epoch = nextToken(max(this.highest, facts.tableNext), now.wall, this.o.self.index);
    this.inherit(epoch + 1n);
    this.state = { role: 'active', epoch, established: base !== undefined, suspectSince: undefined, handOff: undefined };
    this.quietSince = undefined;
    this.blocked = undefined;
    out.actions.push({ type: 'promote', epoch, established: base !== undefined });
    log(out, 'info', 'active: serving clients', { epoch: String(epoch), why, fromEpoch: base === undefined ? undefined : String(base.epoch), position: base?.position });
    this.holding = false;
    return this.highest;
  }

  private follow(p: PeerState, epoch: Token, now: Now, facts: DataFacts, out: Ready): void {
    const st: State & { role: 'standby' } = { role: 'standby', leader: p.info, epoch, since: now.mono, askedAt: now.mono };
    this.state = st;
    this.quietSince = undefined;
    this.blocked = undefined;
    out.actions.push({ type: 'follow', leader: p.info, epoch });
    log(out, 'info', `standby: following the active node ${p.info.name}`, { active: p.info.name, activeAddress: p.info.clientAddress, epoch: String(epoch) });
    this.holding = false; // standing redirects every client
    this.askToFollow(st, now, out);
    this.broadcast(now, facts, out);
  }

  private askToFollow(st: State & { role: 'standby' }, now: Now, out: Ready): void {
    st.askedAt = now.mono;
    out.send.push({ to: st.leader.name, message: { type: 'follow', epoch: st.epoch } });
  }

  private startHandOff(st: State & { role: 'active' }, to: PeerInfo, exitAfter: boolean, now: Now, out: Ready, declined: readonly string[]): void {
    const serial = ++this.handOffs;
    st.handOff = { to, since: now.mono, exitAfter, serial, declined };
    log(out, 'info', 'handing off to a successor', { successor: to.name, exitAfter, serial });
    out.actions.push({ type: 'hand-off', to, epoch: st.epoch, serial });
  }

  private handedOff(st: State & { role: 'active' }, epoch: Token, now: Now, facts: DataFacts, out: Ready): void {
    const h = st.handOff!;
    log(out, 'info', 'hand-off confirmed: the successor serves now', { successor: h.to.name, epoch: String(epoch) });
    out.actions.push({ type: 'hand-off-ended', taken: true });
    if (h.exitAfter) {
      this.state = { role: 'stopping' };
      out.actions.push({ type: 'stand', redirect: h.to.clientAddress });
      return;
    }
    this.follow(this.peers.get(h.to.name)!, epoch, now, facts, out);
  }

  private stopNow(now: Now, facts: DataFacts, out: Ready): void {
    const wasServing = this.state.role === 'active';
    this.state = { role: 'stopping' };
    if (wasServing) out.actions.push({ type: 'stand', redirect: '-' });
    this.broadcast(now, facts, out);
  }

  private hold(out: Ready, on: boolean, fields: Record<string, unknown> = {}): void {
    if (on === this.holding) return;
    this.holding = on;
    if (on) log(out, 'info', 'holding client requests while deciding', fields);
    out.actions.push({ type: on ? 'hold-clients' : 'release-clients' });
  }

  // --- what we know of peers ---

  private refusingNow(p: PeerState, now: number): boolean {
    return p.refusing !== undefined && now - p.refusing.at < REFUSAL_TTL_MS;
  }

  private linkOf(p: PeerState, now: number): RolePeerView['link'] {
    if (this.refusingNow(p, now)) return 'refusing';
    if (this.refusedDial(p)) return 'gone';
    if (now - p.heardAt < this.T) return p.hb === undefined ? 'unknown' : 'reachable';
    return now - Math.max(p.heardAt, this.observingSince) >= this.T ? 'gone' : 'unknown';
  }

  private deadByRefusal(name: string): boolean {
    const p = this.peers.get(name);
    return p !== undefined && this.refusedDial(p);
  }

  /**
   * Its peer port refused our dial since we last heard it, and since we last
   * woke from a pause: a refusal from before a pause is no evidence now (the
   * process may have been started again meanwhile), as silence is not.
   */
  private refusedDial(p: PeerState): boolean {
    return p.connRefusedAt > p.heardAt && p.connRefusedAt >= this.observingSince;
  }

  /** The reachable active peer with the best table. */
  private bestActive(now: number): PeerState | undefined {
    let best: PeerState | undefined;
    for (const p of this.peers.values()) {
      if (p.hb?.role !== 'active' || this.linkOf(p, now) !== 'reachable') continue;
      if (best === undefined || dominates(claimOf(p.hb), claimOf(best.hb!))) best = p;
    }
    return best;
  }

  private myClaim(facts: DataFacts): Claim | undefined {
    const st = this.state;
    if (st.role === 'active') return { epoch: st.epoch, established: st.established, position: facts.stream?.position ?? 0 };
    const r = facts.replica;
    return r === undefined ? undefined : { epoch: r.epoch, established: true, position: r.position };
  }

  /**
   * Our wall clock stepped (NTP fixing it, an operator, a VM restore): what
   * we measured of our peers' clocks moves by the same amount, so offsets
   * stay right, the last one of a peer that has gone included. An OS suspend
   * looks the same from inside (the monotonic clock stopped, not the wall
   * clock): the shift is then wrong until fresh heartbeats replace those
   * samples (WINDOW of them, a few heartbeat intervals).
   */
  private watchOwnClock(now: Now, out: Ready): void {
    this.wallNow = now.wall;
    const base = now.wall - now.mono;
    const step = base - this.wallBase;
    this.wallBase = base;
    if (Math.abs(step) < STEP_MS) return;
    this.offsets.shift(step);
    log(out, 'warn', step > 0 ? "this node's wall clock stepped forward, or its machine was suspended" : "this node's wall clock stepped back", { stepMs: Math.round(step) });
  }

  private checkClocks(now: Now, out: Ready): void {
    for (const p of this.peers.values()) {
      const name = p.info.name;
      const isBeyond = this.offsets.beyond(name, this.clockBoundMs, now.mono);
      if (isBeyond === this.beyond.has(name)) continue;
      const e = this.offsets.estimate(name, now.mono);
      if (isBeyond) {
        this.beyond.add(name);
        log(out, 'error', "a peer's clock is beyond the bound the fencing tokens allow: this node will not promote while it lasts; fix the clocks (NTP)", {
          peer: name,
          offsetMs: Math.round(e!.offsetMs),
          errorMs: Math.round(e!.errorMs),
          boundMs: this.clockBoundMs,
        });
      } else {
        this.beyond.delete(name);
        log(out, 'info', "a peer's clock is back within the bound", { peer: name, offsetMs: e === undefined ? undefined : Math.round(e.offsetMs) });
      }
    }
  }

  // --- messages out ---

  private broadcast(now: Now, facts: DataFacts, out: Ready): void {
    for (const p of this.peers.values()) out.send.push({ to: p.info.name, message: this.heartbeatFor(p, now, facts) });
  }

  private heartbeatFor(p: PeerState, now: Now, facts: DataFacts): Heartbeat {
    const claim = this.myClaim(facts);
    const st = this.state;
    const echo = p.stamp === undefined ? undefined : { mono: p.stamp.mono, holdMs: now.mono - p.stamp.at };
    return {
      type: 'heartbeat',
      role: st.role,
      epoch: claim?.epoch ?? 0n,
      established: claim?.established ?? false,
      position: claim?.position ?? 0,
      eligible: this.eligible(now.mono),
      nextToken: max(this.highest, facts.tableNext),
      following: st.role === 'standby' ? st.leader.name : undefined,
      heard: [...this.peers.values()].filter((q) => this.linkOf(q, now.mono) === 'reachable').map((q) => q.info.name),
      wall: now.wall,
      mono: now.mono,
      echo: echo !== undefined && echo.holdMs <= 600_000 ? echo : undefined,
    };
  }
}

function newReady(): Ready {
  return { actions: [], send: [], log: [] };
}

function log(out: Ready, level: LogLine['level'], msg: string, fields: Record<string, unknown>): void {
  out.log.push({ level, msg, fields });
}
