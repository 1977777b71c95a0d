/**
 * Priority cluster (seed 000): among live nodes the highest-priority one is
 * active and alone serves clients; the others are standbys that replicate its
 * lock table and answer clients with `M <active>`.
 *
 * - Failure: a peer is down when it has been silent for the failover timeout,
 *   or when our own connection attempt to its peer port is refused (nothing
 *   listens: its process is gone). A closed link proves nothing and is
 *   re-dialled at once (peer-mesh.ts). When every higher-priority node is
 *   down, the next standby promotes itself with its replicated state.
 * - While a standby decides (its active has gone quiet or its stream broke,
 *   and it has not promoted yet) it holds client requests instead of
 *   redirecting them to a node that may be dead; then it serves them, or
 *   redirects them to whichever node is active.
 * - A returning higher-priority node joins as a standby, catches up, and the
 *   active hands over to it gracefully.
 * - Graceful hand-off (shutdown or the above): the active stops reading
 *   requests and freezes its deadlines, sends everything and then HANDOFF;
 *   the successor, having applied it all, becomes active and says TAKEN; the
 *   old active answers its waiters `T` and its connections `M <successor>`.
 * - Two actives (a partition): an active steps back as soon as it hears an
 *   active of higher priority, or one that has not heard it for a failover
 *   timeout (a one-way partition: that one would never step back); what it
 *   granted meanwhile is lost (fencing covers it).
 * - Tokens: a hybrid logical clock (hlc.ts): every grant's token is above
 *   every token this node has heard of and not below its clock, in its own
 *   residue; replicated grants carry their token, so replay is exact.
 * - Replication leaves before the reply that depends on it (flushReplication,
 *   same turn), and with `sync-standbys N` replies wait until N standbys have
 *   acknowledged it.
 */
import type { PeerStatus, ReplicationStatus } from '../node/node-view.js';
import type { ModeHost, NodeMode } from '../node/mode.js';
import type { Token } from '../state-machine/commands.js';
import { LockTable } from '../state-machine/lock-table.js';
import type { LeasedRecord } from '../engine/lock-engine.js';
import { nextToken } from './hlc.js';
import { loadPeerTls } from '../peers/peer-tls.js';
import type { TimerHandle } from '../seams/clock.js';
import { clusterIdentity } from '../peers/cluster-identity.js';
import { defaultPeerListen, parsePeers, type PeerInfo } from '../peers/members.js';
import { PeerMesh, type MeshHandler } from '../peers/peer-mesh.js';
import { checkBound, peerTokenCeiling } from '../peers/peer-bounds.js';
import { decodePeerLine, encodePeerMessage, type PeerMessage, type PeerRole } from './peer-protocol.js';
import { Replica } from './replica.js';
import { decideRole, type PeerView } from './roles.js';
import { ReplicationSource } from './replication-source.js';

/** Longest an active waits for its successor's TAKEN before it goes on serving. */
const HANDOFF_TIMEOUT_MS = 2_000;
const ACK_DELAY_MS = 5;
/** Heartbeat intervals of silence from the active after which a standby holds client requests. */
const QUIET_HEARTBEATS = 2;
/**
 * How far, in failover-timeouts, the dead active's last tokens may lead this
 * node's clock: the clock skew the tokens allow (a half) plus the token
 * reservation (a quarter, see hlc.ts). docs/cluster.md states it.
 */
const CLOCK_BUDGET = 0.75;

interface HandOff {
  readonly target: PeerInfo;
  readonly exitAfter: boolean;
  readonly timer: TimerHandle;
  readonly done: (taken: boolean) => void;
}

export class PriorityMode implements NodeMode, MeshHandler<PeerMessage> {
  readonly name = 'priority';
  private state: PeerRole = 'starting';
  private readonly self: PeerInfo;
  private readonly others: PeerInfo[];
  private readonly mesh: PeerMesh<PeerMessage>;
  private readonly views = new Map<string, PeerView>();
  /** Since when each active peer has been saying it does not hear us (one-way partition). */
  private readonly deafSince = new Map<string, number>();
  private following: PeerInfo | undefined;
  private readonly replica: Replica;
  private source: ReplicationSource | undefined;
  /** One above the highest token this node has heard of anywhere (own, replicated, announced). */
  private highestSeen: Token;
  private handOff: HandOff | undefined;
  /** The node that handed over to us: its 'active' heartbeats sent before our TAKEN reached it are stale. */
  private handedOverBy: string | undefined;
  /** A standby holding client requests while it decides (see the header). */
  private deciding = false;
  /** Since when the active this standby follows has been quiet. */
  private quietSince: number | undefined;
  /** A promotion waiting for this node's clock (see promotionWait). */
  private promoteAt: number | undefined;
  private ticker: TimerHandle | undefined;
  private startedAt = 0;
  private ackQueued = false;
  private readonly syncStandbys: number;
  /**
   * Standbys that asked to follow while our link to them was not up yet (their
   * FOLLOW can overtake our link's WELCOME): they get their stream once it is.
   */
  private readonly followWhenUp = new Set<string>();
  /** When this standby last asked its active for a stream (FOLLOW). */
  private followSentAt = 0;

  constructor(private readonly host: ModeHost) {
    const all = parsePeers(host.config.peers);
    this.self = all.find((p) => p.name === host.config.node)!;
    this.others = all.filter((p) => p !== this.self);
    this.highestSeen = host.tokenFloor;
    this.syncStandbys = host.config['sync-standbys'];
    this.replica = new Replica(host.engine.records, (why) => this.diverged(why));
    this.mesh = new PeerMesh(
      this.self,
      this.others,
      loadPeerTls(host.config),
      host.env.transport,
      host.clock,
      host.logger,
      this,
      decodePeerLine,
      clusterIdentity('priority', all),
      undefined,
      host.events,
    );
  }

  get role(): 'standby' | 'active' {
    return this.state === 'active' ? 'active' : 'standby';
  }

  async start(): Promise<void> {
    const listen = this.host.config['peer-listen'] ?? defaultPeerListen(this.host.config.listen);
    const address = await this.mesh.listen(listen);
    this.startedAt = this.host.clock.now();
    this.ticker = this.host.clock.every(this.host.config['heartbeat-interval'], () => this.tick());
    this.host.logger.info({ peerListen: address, peers: this.others.map((p) => p.name) }, 'priority cluster: looking for an active node');
  }

  async stop(): Promise<void> {
    if (this.state === 'active') {
      // Any standby that streams will do: under load one always lags a few commands, and the HANDOFF
      // follows them on the same ordered stream (the successor takes over only once it applied them all).
      const successor = this.others
        .filter((p) => this.reachable(p) && this.source!.streaming(p.name))
        .sort((a, b) => a.index - b.index)[0];
      if (successor !== undefined) await this.startHandOff(successor, true);
      else this.host.logger.warn('no standby receives the stream: stopping without a hand-off');
    }
    this.state = 'stopping';
    this.broadcastHeartbeat();
    this.mesh.flushAll();
    this.ticker?.cancel();
    await this.mesh.close();
  }

  updateTls(): boolean {
    const tls = loadPeerTls(this.host.config);
    if (tls === undefined) return false;
    this.mesh.updateTls(tls);
    return true;
  }

  redirectTarget(): string | undefined {
    if (this.state === 'active' && this.handOff === undefined) return undefined;
    return this.following?.clientAddress ?? '-';
  }

  activeAddress(): string | undefined {
    if (this.state === 'active') return this.self.clientAddress;
    return this.following?.clientAddress;
  }

  heldCount(): number {
    return this.lockTable()?.size ?? 0;
  }

  lockTable(): LockTable<LeasedRecord> | undefined {
    return this.source?.table ?? this.replica.table;
  }

  flushReplication(): void {
    this.source?.flushNow();
  }

  peers(): PeerStatus[] {
    return this.others.map((p) => {
      const view = this.views.get(p.name);
      const reachable = this.reachable(p);
      return {
        name: p.name,
        address: p.clientAddress,
        role: reachable && view !== undefined ? roleName(view.role) : 'unknown',
        reachable,
        ...(this.source?.isFollowing(p.name) === true ? { lag: this.source.lag(p.name)!, lagMs: this.source.lagMs(p.name)! } : {}),
      };
    });
  }

  replicationStatus(): ReplicationStatus | undefined {
    if (this.state !== 'active' || this.source === undefined) return undefined;
    const acking = this.source.ackingWithin(this.host.config['failover-timeout']);
    return { standbysAcking: acking, syncStandbys: this.syncStandbys, alone: acking === 0 };
  }

  // --- peer messages ---

  message(peer: string, m: PeerMessage): void {
    // Tokens from a peer are bounded before anything inherits or stores them (issue 25, F4: a
    // heartbeat's 2^64-2 was inherited and persisted). Out of range: the mesh closes the link.
    const ceiling = peerTokenCeiling(this.host.clock.wallNow());
    if ('nextToken' in m) checkBound('next-token', m.nextToken, ceiling);
    if ('token' in m && m.token !== undefined) checkBound('token', m.token, ceiling);
    switch (m.type) {
      case 'heartbeat': {
        // The node that handed over to us says 'active' until our TAKEN reaches it: not a second active.
        const stale = m.role === 'active' && this.handedOverBy === peer;
        if (m.role !== 'active' && this.handedOverBy === peer) this.handedOverBy = undefined;
        this.views.set(peer, { role: stale ? 'stopping' : m.role, following: m.following, appliedSeq: m.appliedSeq, hearsUs: m.heard.includes(this.self.name) });
        this.trackDeafness(peer, m.role === 'active' && !stale && !m.heard.includes(this.self.name));
        this.inherit(m.nextToken);
        if (m.role === 'active') this.evaluate();
        return;
      }
      case 'follow':
        if (this.state === 'active' && this.handOff === undefined && !this.source!.follow(peer)) this.followWhenUp.add(peer);
        return;
      case 'ack':
        if (this.source?.ack(peer, m.seq) === true && this.syncStandbys > 0) this.host.commitAdvanced();
        return;
      case 'handoff':
        if (this.following?.name === peer) this.takeOver(peer, m.seq);
        return;
      case 'taken':
        this.inherit(m.nextToken);
        if (this.handOff?.target.name === peer) this.handOffDone();
        return;
      default:
        if (this.following?.name === peer && this.state !== 'active' && this.replica.handle(m)) {
          if (m.type === 'command' || m.type === 'snapshot-end') this.queueAck();
          // A snapshot in progress is progress: the FOLLOW watchdog (tick) waits on.
          else this.followSentAt = this.host.clock.now();
        }
    }
  }

  outboundUp(peer: string): void {
    this.mesh.send(peer, this.heartbeat());
    if (this.followWhenUp.delete(peer) && this.state === 'active' && this.handOff === undefined) this.source!.follow(peer);
    if (this.following?.name === peer && !this.replica.synced) this.askToFollow();
  }

  outboundDown(peer: string): void {
    this.source?.unfollow(peer);
  }

  inboundUp(peer: string): void {
    // What we knew of the peer came over the old link (maybe from an earlier process): forget it.
    this.views.delete(peer);
    this.deafSince.delete(peer);
    if (this.handedOverBy === peer) this.handedOverBy = undefined;
    // A new stream from the node we follow: start over from a snapshot.
    if (this.following?.name === peer) {
      this.replica.reset();
      this.askToFollow();
    }
  }

  /** Asks the active for a (new) stream. */
  private askToFollow(): void {
    this.followSentAt = this.host.clock.now();
    if (this.following !== undefined) this.mesh.send(this.following.name, encodePeerMessage({ type: 'follow' }));
  }

  inboundDown(peer: string): void {
    // Not a failure by itself (see peer-mesh.ts): the peer re-dials at once if it is alive.
    if (this.following?.name === peer) {
      this.host.logger.warn({ active: peer }, 'lost the replication stream from the active node; waiting for it to reconnect or fall silent');
      this.updateDeciding();
    }
  }

  connectRefused(peer: string): void {
    // Evidence that the peer's process is gone: decide now rather than at the next tick.
    if (this.following?.name === peer || this.state === 'starting') this.evaluate();
  }

  // --- roles ---

  private tick(): void {
    this.broadcastHeartbeat();
    if (this.state !== 'active' && this.replica.table !== undefined) this.host.reserveTokens(this.replica.table.nextToken);
    // The active keeps its reservation ahead of the clock, so a grant after a quiet spell does not wait for an fsync.
    if (this.state === 'active' && this.handOff === undefined) this.host.reserveTokens(this.tokenFor(this.source!.table.nextToken));
    // An ack per heartbeat even when idle: the active tells "no standby acknowledges" from "nothing to acknowledge".
    if (this.state === 'standby' && this.following !== undefined && this.replica.synced) {
      this.mesh.send(this.following.name, encodePeerMessage({ type: 'ack', seq: this.replica.appliedSeq }));
    }
    // A FOLLOW (or its snapshot) lost with a link that broke meanwhile: ask again rather than wait forever.
    if (this.state === 'standby' && this.following !== undefined && !this.replica.synced && this.host.clock.now() - this.followSentAt > this.host.config['failover-timeout']) {
      this.replica.reset();
      this.askToFollow();
    }
    this.evaluate();
  }

  private reachable(p: PeerInfo): boolean {
    return this.mesh.reachable(p.name, this.host.config['failover-timeout']);
  }

  private evaluate(): void {
    const now = this.host.clock.now();
    const d = decideRole({
      state: this.state,
      handingOff: this.handOff !== undefined,
      self: this.self,
      others: this.others.map((p) => {
        const since = this.deafSince.get(p.name);
        return { peer: p, reachable: this.reachable(p), view: this.views.get(p.name), deafMs: since === undefined ? 0 : now - since };
      }),
      failoverTimeoutMs: this.host.config['failover-timeout'],
      following: this.following,
      inSync: (p) => this.source!.inSync(p.name),
      discoveryDone: () => this.discoveryDone(),
      misconfigured: this.mesh.misconfiguredPeers.length > 0,
    });
    switch (d.action) {
      case 'stay':
        break;
      case 'demote':
        this.demote(d.winner, d.why);
        break;
      case 'lead':
        if (d.handOffTo !== undefined) void this.startHandOff(d.handOffTo, false);
        break;
      case 'follow':
        this.follow(d.active);
        break;
      case 'promote':
        if (!this.promotionWait()) this.promote();
        break;
    }
    if (d.action !== 'promote') this.promoteAt = undefined;
    this.updateDeciding();
  }

  /**
   * A standby that promotes because the active's process is gone (its peer
   * port refused us), before a whole failover-timeout of silence: the dead
   * active's last grants, never replicated here, carry tokens up to its clock
   * plus its reservation, and this node's clock may be behind its clock by
   * the allowed skew. Its own tokens are above them once its clock has moved
   * on by that budget, so it waits that long, holding client requests, before
   * serving. (Serving at once let a successor issue tokens below the dead
   * active's last ones: whole-node simulation, priority seed 2437.) After a
   * whole failover-timeout of silence it has waited long enough already.
   */
  private promotionWait(): boolean {
    const timeout = this.host.config['failover-timeout'];
    const last = this.following;
    if (last === undefined || this.mesh.silentFor(last.name) >= timeout) return false;
    const now = this.host.clock.now();
    if (this.promoteAt === undefined) {
      this.promoteAt = now + CLOCK_BUDGET * timeout;
      this.host.clock.schedule(CLOCK_BUDGET * timeout, () => {
        if (this.state === 'standby') this.evaluate();
      });
      this.host.logger.info({ active: last.name, waitMs: CLOCK_BUDGET * timeout }, 'the active node is gone: promoting once the clock allows its last tokens');
    }
    return now < this.promoteAt;
  }

  /**
   * A standby whose active has gone quiet (or whose stream from it broke)
   * holds client requests until it knows more: promoting, following another
   * node, or hearing the active again. At most two failover timeouts: a
   * standby that is not next in line (a higher-priority standby still hears
   * the active) may never decide, and its clients are better redirected.
   */
  private updateDeciding(): void {
    const f = this.following;
    const now = this.host.clock.now();
    const quiet =
      this.state === 'standby' &&
      f !== undefined &&
      (!this.mesh.hasInbound(f.name) || this.mesh.silentFor(f.name) > QUIET_HEARTBEATS * this.host.config['heartbeat-interval']);
    if (!quiet) this.quietSince = undefined;
    else this.quietSince ??= now;
    // A promotion waiting for the clock holds clients too: they wait here rather than follow a redirect to the dead node.
    const hold = (this.state === 'standby' && this.promoteAt !== undefined) || (quiet && now - this.quietSince! <= 2 * this.host.config['failover-timeout']);
    if (hold === this.deciding) return;
    this.deciding = hold;
    if (hold) {
      this.host.logger.info({ active: f?.name }, 'the active node is quiet: holding client requests while deciding');
      this.host.pauseClients();
    } else if (this.state === 'standby') {
      this.host.resumeClients();
    }
  }

  /**
   * A starting node must not promote while a running active may simply not
   * have been heard yet (on a loaded machine links take a while): it waits a
   * failover timeout, and then until every peer has either been heard from
   * or refused our connection, for at most ten failover timeouts.
   */
  private discoveryDone(): boolean {
    const timeout = this.host.config['failover-timeout'];
    const elapsed = this.host.clock.now() - this.startedAt;
    if (elapsed < timeout) return false;
    if (elapsed >= 10 * timeout) return true;
    return this.others.every((p) => this.reachable(p) || this.mesh.connectRefused(p.name));
  }

  private trackDeafness(peer: string, deaf: boolean): void {
    if (!deaf) this.deafSince.delete(peer);
    else if (!this.deafSince.has(peer)) this.deafSince.set(peer, this.host.clock.now());
  }

  /** Every token heard of is inherited: the next grant here goes above it. */
  private inherit(next: Token): void {
    if (next > this.highestSeen) this.highestSeen = next;
  }

  private follow(active: PeerInfo): void {
    this.host.logger.info({ active: active.name, activeAddress: active.clientAddress }, `standby: following the active node ${active.name}`);
    this.state = 'standby';
    this.following = active;
    this.deciding = false;
    this.replica.reset();
    this.host.stand(active.clientAddress);
    this.askToFollow();
  }

  private promote(): void {
    this.promoteAt = undefined;
    const replicated = this.replica.table ?? this.replica.fallback;
    const table = replicated ?? new LockTable(this.host.tokenFloor, this.host.engine.records);
    if (this.highestSeen > table.nextToken) table.apply({ type: 'token-floor', atLeast: this.highestSeen });
    this.source = new ReplicationSource(table, this.mesh, this.host.clock);
    this.state = 'active';
    this.following = undefined;
    this.deciding = false;
    this.replica.clear();
    this.host.serve(this.source, (next) => this.admitToken(next));
    if (this.syncStandbys > 0) {
      const source = this.source;
      const rank = (peer: string) => this.others.find((p) => p.name === peer)?.index ?? Infinity;
      this.host.setReplyGate({ lastIndex: () => source.sequence, commitIndex: () => source.confirmedBy(this.syncStandbys, rank) });
    }
    this.host.logger.info(
      { locks: table.size, replicated: replicated !== undefined, firstToken: this.tokenFor(table.nextToken).toString(), syncStandbys: this.syncStandbys },
      'active: serving clients',
    );
    this.broadcastHeartbeat();
  }

  /** The token the next grant gets: see hlc.ts. */
  private tokenFor(next: Token): Token {
    return nextToken(next > this.highestSeen ? next : this.highestSeen, this.host.clock.wallNow(), this.self.index);
  }

  /**
   * Called before each grant: moves the table's next token to the hybrid
   * clock's (locally: the replicated grant carries its token, so standbys
   * need no separate command), then makes sure it is reserved on disk.
   */
  private admitToken(next: Token): boolean {
    const table = this.source!.table;
    const t = this.tokenFor(next);
    if (t > table.nextToken) table.apply({ type: 'token-floor', atLeast: t });
    return this.host.reserveTokens(t);
  }

  private demote(winner: PeerInfo, why: string): void {
    this.host.logger.warn(
      { winner: winner.name, why, lostLocks: this.source?.table.size ?? 0 },
      'another node is active: stepping back to standby; grants made here since the split are dropped',
    );
    if (this.source !== undefined) this.inherit(this.source.table.nextToken);
    this.source = undefined;
    if (this.syncStandbys > 0) this.host.setReplyGate(undefined);
    this.follow(winner);
  }

  // --- graceful hand-off ---

  private async startHandOff(target: PeerInfo, exitAfter: boolean): Promise<boolean> {
    const source = this.source!;
    this.host.logger.info({ successor: target.name, exitAfter }, 'handing off to a successor');
    this.host.pauseClients();
    this.host.engine.freeze();
    return new Promise<boolean>((resolve) => {
      const timer = this.host.clock.schedule(HANDOFF_TIMEOUT_MS, () => {
        this.host.logger.warn({ successor: target.name }, 'hand-off not confirmed in time; serving on');
        this.handOff = undefined;
        this.host.engine.thaw();
        this.host.resumeClients();
        resolve(false);
      });
      this.handOff = { target, exitAfter, timer, done: resolve };
      source.sendAfterAll(target.name, (seq) => encodePeerMessage({ type: 'handoff', seq }));
    });
  }

  private handOffDone(): void {
    const h = this.handOff!;
    h.timer.cancel();
    this.handOff = undefined;
    if (this.source !== undefined) this.inherit(this.source.table.nextToken);
    this.source = undefined;
    if (this.syncStandbys > 0) this.host.setReplyGate(undefined);
    this.host.logger.info({ successor: h.target.name }, 'hand-off confirmed: the successor serves now');
    if (h.exitAfter) {
      this.state = 'stopping';
      this.host.stand(h.target.clientAddress);
    } else {
      this.follow(h.target);
    }
    // At once: the successor must not take our last 'active' heartbeat for a second active.
    this.broadcastHeartbeat();
    h.done(true);
  }

  /** The node we follow hands over: take over if we have applied its whole stream. */
  private takeOver(peer: string, seq: number): void {
    if (!this.replica.synced || this.replica.appliedSeq !== seq) {
      this.host.logger.error({ from: peer, seq, applied: this.replica.appliedSeq }, 'refusing a hand-off: this node has not applied the whole stream');
      return;
    }
    this.handedOverBy = peer;
    // Its last heartbeat said 'active' too: that was before it handed over (see handedOverBy).
    const view = this.views.get(peer);
    if (view !== undefined) view.role = 'stopping';
    this.promote();
    this.mesh.send(peer, encodePeerMessage({ type: 'taken', nextToken: this.source!.table.nextToken }));
  }

  private diverged(why: string): void {
    this.host.logger.error({ why }, 'replica disagrees with the active node; resynchronising');
    this.replica.reset();
    if (this.following !== undefined) this.mesh.reset(this.following.name);
  }

  // --- messages out ---

  private heartbeat(): string {
    const table = this.source?.table ?? this.replica.table;
    const next = table !== undefined && table.nextToken > this.highestSeen ? table.nextToken : this.highestSeen;
    return encodePeerMessage({
      type: 'heartbeat',
      // Still 'active' during a hand-off: followers keep following until TAKEN.
      role: this.state,
      nextToken: next,
      following: this.following?.name,
      appliedSeq: this.replica.appliedSeq,
      heard: this.others.filter((p) => this.reachable(p)).map((p) => p.name),
    });
  }

  private broadcastHeartbeat(): void {
    const hb = this.heartbeat();
    for (const p of this.others) this.mesh.send(p.name, hb);
  }

  /**
   * Acks are batched (one per ACK_DELAY_MS at most): a write per incoming
   * chunk would cost more than applying it. With sync-standbys the active's
   * replies wait for them: one per turn then.
   */
  private queueAck(): void {
    if (this.ackQueued) return;
    this.ackQueued = true;
    const send = () => {
      this.ackQueued = false;
      if (this.following !== undefined) this.mesh.send(this.following.name, encodePeerMessage({ type: 'ack', seq: this.replica.appliedSeq }));
    };
    if (this.syncStandbys > 0) this.host.clock.soon(send);
    else this.host.clock.schedule(ACK_DELAY_MS, send);
  }
}

function roleName(role: PeerRole): PeerStatus['role'] {
  return role === 'starting' ? 'standby' : role;
}
