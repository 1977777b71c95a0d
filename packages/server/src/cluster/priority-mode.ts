/**
 * Priority cluster (seed 000): among live nodes the highest-priority one is
 * active and alone serves clients; the others are standbys that replicate its
 * lock table asynchronously and answer clients with `M <active>`.
 *
 * - Failure: when every higher-priority node has been silent for the failover
 *   timeout, the next standby promotes itself with its replicated state.
 * - A returning higher-priority node joins as a standby, catches up, and the
 *   active hands over to it gracefully.
 * - Graceful hand-off (shutdown or the above): the active stops reading
 *   requests and freezes its deadlines, sends everything and then HANDOFF;
 *   the successor, having applied it all, becomes active and says TAKEN; the
 *   old active answers its waiters `T` and its connections `M <successor>`.
 * - Two actives (a healed partition): the lower-priority one steps back and
 *   resynchronises; what it granted meanwhile is lost (fencing covers it).
 * - Tokens: each promotion starts a new epoch in the token's high bits (see
 *   epoch.ts), so tokens grow across failovers and stay unique in a partition.
 */
import type { PeerStatus } from '../node/node-view.js';
import type { ModeHost, NodeMode } from '../node/mode.js';
import type { Token } from '../state-machine/commands.js';
import { EpochsExhaustedError } from '../errors.js';
import { LockTable } from '../state-machine/lock-table.js';
import { epochFull, epochOf, firstTokenOf, nextEpoch } from './epoch.js';
import { loadPeerTls } from '../peers/peer-tls.js';
import type { TimerHandle } from '../seams/clock.js';
import { defaultPeerListen, parsePeers, type PeerInfo } from '../peers/members.js';
import { PeerMesh, type MeshHandler } from '../peers/peer-mesh.js';
import { decodePeerLine, encodePeerMessage, type PeerMessage, type PeerRole } from './peer-protocol.js';
import { Replica } from './replica.js';
import { decideRole, type PeerView } from './roles.js';
import { ReplicationSource } from './replication-source.js';

/** Longest an active waits for its successor's TAKEN before it goes on serving. */
const HANDOFF_TIMEOUT_MS = 2_000;
const ACK_DELAY_MS = 5;

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
  private following: PeerInfo | undefined;
  private readonly replica: Replica;
  private source: ReplicationSource | undefined;
  private epoch = 0n;
  /** Highest epoch this node has seen anywhere (own, replicated, announced). */
  private highestEpoch = 0n;
  private handOff: HandOff | undefined;
  private ticker: TimerHandle | undefined;
  private startedAt = 0;
  private ackQueued = false;

  constructor(private readonly host: ModeHost) {
    const all = parsePeers(host.config.peers);
    this.self = all.find((p) => p.name === host.config.node)!;
    this.others = all.filter((p) => p !== this.self);
    this.highestEpoch = epochOf(host.tokenFloor);
    this.replica = new Replica(host.engine.records, (why) => this.diverged(why));
    this.mesh = new PeerMesh(this.self, this.others, host.config['peer-token'], loadPeerTls(host.config), host.env.transport, host.clock, host.logger, this, decodePeerLine, undefined, host.events);
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
      const successor = this.others
        .filter((p) => this.reachable(p) && this.source!.inSync(p.name))
        .sort((a, b) => a.index - b.index)[0];
      if (successor !== undefined) await this.startHandOff(successor, true);
      else this.host.logger.warn('no standby is in sync: stopping without a hand-off');
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
    return (this.source?.table ?? this.replica.table)?.size ?? 0;
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

  // --- peer messages ---

  message(peer: string, m: PeerMessage): void {
    switch (m.type) {
      case 'heartbeat':
        this.views.set(peer, { role: m.role, epoch: m.epoch, following: m.following, appliedSeq: m.appliedSeq });
        if (m.epoch > this.highestEpoch) this.highestEpoch = m.epoch;
        if (m.role === 'active') this.evaluate();
        return;
      case 'follow':
        if (this.state === 'active' && this.handOff === undefined) this.source!.follow(peer);
        return;
      case 'ack':
        this.source?.ack(peer, m.seq);
        return;
      case 'handoff':
        if (this.following?.name === peer) this.takeOver(peer, m.seq);
        return;
      case 'taken':
        if (this.handOff?.target.name === peer) this.handOffDone(m.epoch);
        return;
      default:
        if (this.following?.name === peer && this.state !== 'active' && this.replica.handle(m)) {
          if (m.type === 'command' || m.type === 'snapshot-end') this.queueAck();
        }
    }
  }

  outboundUp(peer: string): void {
    this.mesh.send(peer, this.heartbeat());
    if (this.following?.name === peer && !this.replica.synced) this.mesh.send(peer, encodePeerMessage({ type: 'follow' }));
  }

  outboundDown(peer: string): void {
    this.source?.unfollow(peer);
  }

  inboundUp(peer: string): void {
    // What we knew of the peer came over the old link (maybe from an earlier process): forget it.
    this.views.delete(peer);
    // A new stream from the node we follow: start over from a snapshot.
    if (this.following?.name === peer) {
      this.replica.reset();
      this.mesh.send(peer, encodePeerMessage({ type: 'follow' }));
    }
  }

  inboundDown(peer: string): void {
    this.views.delete(peer);
    if (this.following?.name === peer) this.host.logger.warn({ active: peer }, 'lost the replication stream from the active node');
  }

  // --- roles ---

  private tick(): void {
    this.broadcastHeartbeat();
    if (this.state !== 'active' && this.replica.table !== undefined) this.host.reserveTokens(this.replica.table.nextToken);
    this.evaluate();
  }

  private reachable(p: PeerInfo): boolean {
    return this.mesh.reachable(p.name, this.host.config['failover-timeout']);
  }

  private evaluate(): void {
    try {
      this.decide();
    } catch (err) {
      // Out of token epochs (2^24 promotions): this node can never issue a larger token again.
      if (!(err instanceof EpochsExhaustedError)) throw err;
      this.host.fatal(err);
    }
  }

  private decide(): void {
    const d = decideRole({
      state: this.state,
      handingOff: this.handOff !== undefined,
      self: this.self,
      others: this.others.map((p) => ({ peer: p, reachable: this.reachable(p), view: this.views.get(p.name) })),
      epoch: this.epoch,
      highestEpoch: this.highestEpoch,
      following: this.following,
      inSync: (p) => this.source!.inSync(p.name),
      discoveryDone: () => this.discoveryDone(),
    });
    switch (d.action) {
      case 'stay':
        return;
      case 'demote':
        return this.demote(d.winner);
      case 'lead':
        if (d.bumpEpoch) this.bumpEpoch('a peer announced a higher epoch');
        if (d.handOffTo !== undefined) void this.startHandOff(d.handOffTo, false);
        return;
      case 'follow':
        return this.follow(d.active);
      case 'promote':
        return this.promote();
    }
  }

  /**
   * A starting node must not promote while a running active may simply not
   * have been heard yet (on a loaded machine links take a while): it waits a
   * failover timeout, and then until every peer has either been heard from
   * or failed to connect, for at most ten failover timeouts.
   */
  private discoveryDone(): boolean {
    const timeout = this.host.config['failover-timeout'];
    const elapsed = this.host.clock.now() - this.startedAt;
    if (elapsed < timeout) return false;
    if (elapsed >= 10 * timeout) return true;
    return this.others.every((p) => this.reachable(p) || this.mesh.connectFailed(p.name));
  }

  private follow(active: PeerInfo): void {
    this.host.logger.info({ active: active.name }, 'standby: following the active node');
    this.state = 'standby';
    this.following = active;
    this.replica.reset();
    this.host.stand(active.clientAddress);
    this.mesh.send(active.name, encodePeerMessage({ type: 'follow' }));
  }

  private promote(): void {
    const replicated = this.replica.table ?? this.replica.fallback;
    const table = replicated ?? new LockTable(this.host.tokenFloor, this.host.engine.records);
    const seen = [this.highestEpoch, epochOf(table.nextToken)].reduce((a, b) => (a > b ? a : b));
    this.epoch = nextEpoch(this.self.index, seen);
    this.highestEpoch = this.epoch;
    table.apply({ type: 'token-floor', atLeast: firstTokenOf(this.epoch) });
    this.source = new ReplicationSource(table, this.mesh, this.host.clock);
    this.state = 'active';
    this.following = undefined;
    this.replica.clear();
    this.host.serve(this.source, (next) => this.admitToken(next));
    this.host.logger.info(
      { epoch: this.epoch.toString(), locks: table.size, replicated: replicated !== undefined, firstToken: table.nextToken.toString() },
      'active: serving clients',
    );
    this.broadcastHeartbeat();
  }

  private admitToken(next: Token): boolean {
    if (epochFull(next)) this.bumpEpoch('the epoch ran out of tokens');
    return this.host.reserveTokens(this.source!.table.nextToken);
  }

  private bumpEpoch(why: string): void {
    this.epoch = nextEpoch(this.self.index, this.highestEpoch > this.epoch ? this.highestEpoch : this.epoch);
    this.highestEpoch = this.epoch;
    this.source!.apply({ type: 'token-floor', atLeast: firstTokenOf(this.epoch) });
    this.host.logger.info({ epoch: this.epoch.toString(), why }, 'moved to a new token epoch');
  }

  private demote(winner: PeerInfo): void {
    this.host.logger.warn(
      { winner: winner.name, lostLocks: this.source?.table.size ?? 0 },
      'another active node has higher priority: stepping back to standby; grants made here since the split are dropped',
    );
    this.source = undefined;
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

  private handOffDone(epoch: bigint): void {
    const h = this.handOff!;
    h.timer.cancel();
    this.handOff = undefined;
    if (epoch > this.highestEpoch) this.highestEpoch = epoch;
    this.source = undefined;
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
    this.promote();
    this.mesh.send(peer, encodePeerMessage({ type: 'taken', epoch: this.epoch }));
  }

  private diverged(why: string): void {
    this.host.logger.error({ why }, 'replica disagrees with the active node; resynchronising');
    this.replica.reset();
    if (this.following !== undefined) this.mesh.reset(this.following.name);
  }

  // --- messages out ---

  private heartbeat(): string {
    const table = this.source?.table ?? this.replica.table;
    return encodePeerMessage({
      type: 'heartbeat',
      // Still 'active' during a hand-off: followers keep following until TAKEN.
      role: this.state,
      epoch: this.highestEpoch,
      nextToken: table?.nextToken ?? this.host.tokenFloor,
      following: this.following?.name,
      appliedSeq: this.replica.appliedSeq,
    });
  }

  private broadcastHeartbeat(): void {
    const hb = this.heartbeat();
    for (const p of this.others) this.mesh.send(p.name, hb);
  }

  /** Acks are batched (one per ACK_DELAY_MS at most): a write per incoming chunk would cost more than applying it. */
  private queueAck(): void {
    if (this.ackQueued) return;
    this.ackQueued = true;
    this.host.clock.schedule(ACK_DELAY_MS, () => {
      this.ackQueued = false;
      if (this.following !== undefined) this.mesh.send(this.following.name, encodePeerMessage({ type: 'ack', seq: this.replica.appliedSeq }));
    });
  }
}

function roleName(role: PeerRole): PeerStatus['role'] {
  return role === 'starting' ? 'standby' : role;
}
