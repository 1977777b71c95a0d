/**
 * Priority cluster (seed 000): among live nodes the best placed one is
 * active and alone serves clients; the others are standbys that replicate
 * its lock table and answer clients with `M <active>`.
 *
 * This is the shell around the role machine (role-machine.ts), which makes
 * every role decision: here is only I/O. Peer messages and link events go
 * to the machine; what it returns is carried out: serve over a replication
 * source (replication-source.ts), follow an active into a replica
 * (replica.ts), hold or release clients, hand off, send, log.
 *
 * - Tokens: a hybrid logical clock (hlc.ts): every grant's token is above
 *   every token this node has heard of and not below its clock, in its own
 *   residue; replicated grants carry their token, so replay is exact. Tokens
 *   a peer sends that no clock could explain (far beyond ours) close its link.
 * - Replication leaves before the reply that depends on it (flushReplication,
 *   same turn), and with `sync-standbys N` replies wait until the N
 *   highest-priority standbys that follow have acknowledged it.
 */
import type { PeerStatus, PriorityStatus, ReplicationStatus } from '../node/node-view.js';
import type { ModeHost, NodeMode } from '../node/mode.js';
import type { Token } from '../state-machine/commands.js';
import { LockTable } from '../state-machine/lock-table.js';
import type { LeasedRecord } from '../engine/lock-engine.js';
import type { TimerHandle } from '../seams/clock.js';
import { nextToken } from './hlc.js';
import { defaultPeerListen, parsePeers, type PeerInfo } from '../peers/members.js';
import { createPriorityLinks, PRIORITY_IDENTITY_MODE, type PriorityLinks } from './priority-links.js';
import { clusterIdentity } from '../peers/cluster-identity.js';
import { MEMBER_RECORD, readMemberRecord, writeMemberRecord, type MemberRecord } from './member-record.js';
import { join } from 'node:path';
import { encodePeerMessage, type PeerMessage } from './peer-protocol.js';
import { checkBound, peerTokenCeiling } from '../peers/peer-bounds.js';
import { Replica } from './replica.js';
import { RoleMachine, type DataFacts, type Now, type Ready } from './role-machine.js';
import { ReplicationSource } from './replication-source.js';

const ACK_DELAY_MS = 5;

export class PriorityMode implements NodeMode {
  readonly name = 'priority';
  private readonly self: PeerInfo;
  private readonly others: PeerInfo[];
  private readonly links: PriorityLinks;
  private readonly machine: RoleMachine;
  private readonly replica: Replica;
  private source: ReplicationSource | undefined;
  private ticker: TimerHandle | undefined;
  private wake: TimerHandle | undefined;
  private ackQueued = false;
  private tickQueued = false;
  private readonly syncStandbys: number;
  /**
   * Standbys that asked to follow while our link to them was not up yet (their
   * FOLLOW can overtake our link's WELCOME): they get their stream once it is.
   */
  private readonly followWhenUp = new Set<string>();
  /** Resolves a graceful stop's hand-off (true: the successor took over). */
  private handOffDone: ((taken: boolean) => void) | undefined;

  /** The members this node serves with, as the data directory records them (member-record.ts). */
  private readonly members: MemberRecord;

  constructor(private readonly host: ModeHost) {
    const all = parsePeers(host.config.peers);
    this.self = all.find((p) => p.name === host.config.node)!;
    this.others = all.filter((p) => p !== this.self);
    this.syncStandbys = host.config['sync-standbys'];
    this.members = { identity: clusterIdentity(PRIORITY_IDENTITY_MODE, all), names: all.map((p) => p.name) };
    const recorded = host.config.memory ? undefined : readMemberRecord(host.env.disk, host.config['data-dir']);
    const changed = recorded !== undefined && recorded.identity !== this.members.identity ? recorded.names : undefined;
    if (changed !== undefined) {
      host.logger.warn(
        { before: changed.join(','), now: this.members.names.join(','), record: join(host.config['data-dir'], MEMBER_RECORD) },
        'this data directory last served with other peers: this node promotes only once every node of its new peers list answers with the same list',
      );
    }
    this.machine = new RoleMachine(
      {
        self: this.self,
        others: this.others,
        heartbeatMs: host.config['heartbeat-interval'],
        failoverTimeoutMs: host.config['failover-timeout'],
        // What this node issued or heard of before, not its clock: the machine tells its peers (heartbeats).
        floor: host.recordedTokenMark,
        ...(changed === undefined ? {} : { previousMembers: changed }),
        // Recorded once every peer has answered with the same list (not at start: the list may be a mistake).
        recordMembers: !host.config.memory && (recorded === undefined || changed !== undefined),
      },
      this.now(),
    );
    this.replica = new Replica(host.engine.records, (why) => this.diverged(why), (t, what) => this.plausible(t, what));
    this.links = createPriorityLinks(host, this.self, this.others, all, {
      message: (peer, m) => this.message(peer, m),
      outboundUp: (peer) => this.outboundUp(peer),
      outboundDown: (peer) => this.source?.unfollow(peer),
      inboundUp: (peer) => this.apply(this.machine.link(peer, 'inbound-up', this.now(), this.facts())),
      inboundDown: (peer) => this.apply(this.machine.link(peer, 'inbound-down', this.now(), this.facts())),
      connectRefused: (peer) => this.apply(this.machine.connectRefused(peer, this.now(), this.facts())),
      linkRefused: (peer, reason) => this.apply(this.machine.linkRefused(peer, reason, this.now(), this.facts())),
    });
  }

  get role(): 'standby' | 'active' {
    return this.machine.role === 'active' ? 'active' : 'standby';
  }

  async start(): Promise<void> {
    const listen = this.host.config['peer-listen'] ?? defaultPeerListen(this.host.config.listen);
    const address = await this.links.listen(listen);
    this.ticker = this.host.clock.every(this.host.config['heartbeat-interval'], () => this.tick());
    this.host.logger.info({ peerListen: address, peers: this.others.map((p) => p.name) }, 'priority cluster: looking for an active node');
    if (this.syncStandbys > 0 && this.syncStandbys >= this.others.length) {
      this.host.logger.warn({ syncStandbys: this.syncStandbys, standbys: this.others.length }, 'sync-standbys-allow-stall: every standby must acknowledge each reply, so one standby failure stops every reply until it is back');
    }
    this.apply(this.machine.tick(this.now(), this.facts()));
  }

  async stop(): Promise<void> {
    const r = this.machine.stop(this.now(), this.facts());
    const done = r.handingOff ? new Promise<boolean>((resolve) => (this.handOffDone = resolve)) : undefined;
    this.apply(r);
    if (done !== undefined) await done;
    this.apply(this.machine.stop(this.now(), this.facts()));
    this.links.flushAll();
    this.ticker?.cancel();
    this.wake?.cancel();
    await this.links.close();
  }

  updateTls(): boolean {
    return this.links.updateTls();
  }

  redirectTarget(): string | undefined {
    return this.machine.redirect();
  }

  activeAddress(): string | undefined {
    if (this.machine.role === 'active') return this.self.clientAddress;
    return this.machine.leader?.clientAddress;
  }

  heldCount(): number {
    return this.lockTable()?.size ?? 0;
  }

  lockTable(): LockTable<LeasedRecord> | undefined {
    return this.source?.table ?? this.replica.best;
  }

  flushReplication(): void {
    this.source?.flushNow();
  }

  peers(): PeerStatus[] {
    const now = this.host.clock.now();
    return this.machine.peerViews(now).map((v, i) => {
      const p = this.others[i]!;
      const following = this.source?.isFollowing(p.name) === true;
      const versions = this.links.linkVersions(p.name);
      return {
        name: p.name,
        address: p.clientAddress,
        role: v.link === 'reachable' && v.role !== undefined ? roleName(v.role) : 'unknown',
        reachable: v.link === 'reachable',
        link: v.link,
        ...(v.refusing === undefined ? {} : { refusing: v.refusing }),
        ...(v.clockOffsetMs === undefined ? {} : { clockOffsetMs: Math.round(v.clockOffsetMs * 10) / 10, clockErrorMs: Math.round(v.clockErrorMs! * 10) / 10 }),
        clockBeyondBound: v.clockBeyondBound,
        ...(following ? { lag: this.source!.lag(p.name)!, lagMs: this.source!.lagMs(p.name)! } : {}),
        ...(versions === undefined ? {} : { peerProtocol: versions }),
      };
    });
  }

  priorityStatus(): PriorityStatus {
    return {
      role: this.machine.role,
      epoch: (this.machine.epoch ?? this.machine.followedEpoch)?.toString(),
      ...(this.machine.blockedBy === undefined ? {} : { notPromotingBecause: this.machine.blockedBy }),
      clockBoundMs: this.machine.clockBoundMs,
    };
  }

  replicationStatus(): ReplicationStatus | undefined {
    if (!this.machine.serving || this.source === undefined) return undefined;
    const acking = this.source.ackingWithin(this.host.config['failover-timeout']);
    return { standbysAcking: acking, syncStandbys: this.syncStandbys, alone: acking === 0, stalled: this.stalled(), tableConfirmed: this.machine.tableConfirmed === true };
  }

  /** With sync-standbys, fewer standbys than it needs acknowledge: replies wait. */
  private stalled(): boolean {
    if (this.syncStandbys === 0 || this.source === undefined) return false;
    return this.source.confirmedBy(this.syncStandbys, (peer) => this.rank(peer)) < this.source.sequence && this.source.ackingWithin(this.host.config['failover-timeout']) < this.syncStandbys;
  }

  // --- peer messages ---

  private message(peer: string, m: PeerMessage): void {
    const now = this.now();
    switch (m.type) {
      case 'heartbeat':
        this.plausible(m.nextToken, 'next-token');
        this.plausible(m.epoch, 'epoch');
        return this.apply(this.machine.heartbeat(peer, m, now, this.facts()));
      case 'follow':
        if (this.machine.serving && m.epoch === this.machine.epoch && !this.source!.follow(peer)) this.followWhenUp.add(peer);
        return;
      case 'ack':
        if (this.source !== undefined && m.epoch === this.source.epoch && this.source.ack(peer, m.position) && this.syncStandbys > 0) this.host.commitAdvanced();
        return;
      case 'handoff':
        return this.apply(this.machine.handoff(peer, m.epoch, m.position, m.serial, now, this.facts()));
      case 'declined':
        return this.apply(this.machine.declined(peer, m.epoch, m.serial, m.reason, now, this.facts()));
      case 'taken':
        this.plausible(m.nextToken, 'next-token');
        return this.apply(this.machine.taken(peer, m.epoch, m.nextToken, now, this.facts()));
      default: {
        if (this.machine.leader?.name !== peer) return;
        // A stream of another activation than the one we follow: not ours to apply.
        if (m.type === 'snapshot' && m.epoch !== this.machine.followedEpoch) return this.replica.reset();
        if (!this.replica.handle(m)) return;
        if (m.type === 'command' && m.token !== undefined) this.machine.inherit(m.token + 1n);
        if (m.type === 'command' || m.type === 'snapshot-end') this.queueAck();
      }
    }
  }

  private outboundUp(peer: string): void {
    if (this.followWhenUp.delete(peer) && this.machine.serving) this.source!.follow(peer);
    this.apply(this.machine.link(peer, 'outbound-up', this.now(), this.facts()));
  }

  /**
   * Tokens from a peer are bounded before anything inherits or stores them
   * (issue 25, F4: a heartbeat's 2^64-2 was inherited and persisted): one no
   * peer's clock could have made throws PeerValueOutOfRange, and the mesh
   * closes the link and counts it under `field`.
   */
  private plausible(t: Token, field: string): void {
    checkBound(field, t, peerTokenCeiling(this.host.clock.wallNow()));
  }

  // --- the machine's decisions, carried out ---

  private now(): Now {
    return { mono: this.host.clock.now(), wall: this.host.clock.wallNow() };
  }

  private facts(): DataFacts {
    const source = this.source;
    const claim = this.replica.claim();
    return {
      replica: claim === undefined ? undefined : { ...claim, established: true },
      stream:
        source === undefined
          ? undefined
          : {
              position: source.sequence,
              confirmed: source.confirmedCount,
              follower: (peer) => (source.isFollowing(peer) ? { streaming: source.streaming(peer), lagMs: source.lagMs(peer)! } : undefined),
            },
      tableNext: (source?.table ?? this.replica.best)?.nextToken,
      inbound: (peer) => this.links.hasInbound(peer),
    };
  }

  private tick(): void {
    this.tickQueued = false;
    const next = (this.source?.table ?? this.replica.best)?.nextToken ?? 0n;
    // Standbys keep what they heard of on disk; the active keeps its reservation ahead of the clock,
    // so a grant after a quiet spell does not wait for an fsync.
    if (this.source === undefined) this.host.reserveTokens(next > this.machine.highestToken ? next : this.machine.highestToken);
    else if (this.machine.serving) this.host.reserveTokens(this.tokenFor(this.source.table.nextToken));
    // An ack per heartbeat even when idle: the active tells "no standby acknowledges" from "nothing to acknowledge".
    this.sendAck();
    this.apply(this.machine.tick(this.now(), this.facts()));
  }

  private apply(r: Ready): void {
    for (const l of r.log) this.host.logger[l.level](l.fields, l.msg);
    for (const a of r.actions) {
      switch (a.type) {
        case 'promote':
          this.promote(a.epoch);
          break;
        case 'follow':
          this.stopServing(a.leader.clientAddress);
          this.replica.reset();
          break;
        case 'stand':
          this.stopServing(a.redirect);
          break;
        case 'hold-clients':
          this.host.pauseClients();
          break;
        case 'release-clients':
          this.host.resumeClients();
          break;
        case 'hand-off': {
          this.host.pauseClients();
          this.host.engine.freeze();
          // The serial only where the successor reads version 3 (and may answer DECLINED): a version-2 node takes HANDOFF with two fields.
          const v3 = (this.links.outboundVersion(a.to.name) ?? 2) >= 3;
          this.source?.sendAfterAll(a.to.name, (position) => encodePeerMessage({ type: 'handoff', epoch: a.epoch, position, ...(v3 ? { serial: a.serial } : {}) }));
          break;
        }
        case 'hand-off-ended':
          if (!a.taken && this.machine.serving) {
            this.host.engine.thaw();
            this.host.resumeClients();
          }
          this.handOffDone?.(a.taken);
          this.handOffDone = undefined;
          break;
        case 'resync':
          this.replica.reset();
          break;
        case 'redial':
          this.links.dialNow(a.peer);
          break;
        case 'confirm-members':
          writeMemberRecord(this.host.env.disk, this.host.config['data-dir'], this.members).catch((err: unknown) =>
            this.host.logger.error({ err }, 'could not record the confirmed peers list in the data directory (it is asked again at the next start)'),
          );
          break;
      }
    }
    for (const { to, message } of r.send) {
      // DECLINED is version 3's: a peer whose link from us runs at 2 cannot read it (it waits out its timeout instead).
      if (message.type === 'declined' && (this.links.outboundVersion(to) ?? 2) < 3) continue;
      this.links.send(to, encodePeerMessage(message));
    }
    const wakeAt = r.wakeAt;
    if (wakeAt !== undefined) {
      this.wake?.cancel();
      this.wake = this.host.clock.schedule(Math.max(0, wakeAt - this.host.clock.now()), () => this.apply(this.machine.tick(this.now(), this.facts())));
    }
  }

  private promote(epoch: Token): void {
    // The epoch is this activation's token: durable before anything is served on it.
    if (!this.host.reserveTokens(epoch + 1n)) {
      this.host.fatal(new Error('cannot reserve the epoch of a promotion in the data directory'));
      return;
    }
    const replicated = this.replica.best;
    const table = replicated ?? new LockTable(this.host.tokenFloor, this.host.engine.records);
    const floor = this.machine.highestToken;
    if (floor > table.nextToken) table.apply({ type: 'token-floor', atLeast: floor });
    const source = new ReplicationSource(table, this.links, this.host.clock, epoch);
    this.source = source;
    this.replica.clear();
    this.followWhenUp.clear();
    this.host.serve(source, (next) => this.admitToken(next));
    if (this.syncStandbys > 0) {
      this.host.setReplyGate({
        lastIndex: () => source.sequence,
        commitIndex: () => source.confirmedBy(this.syncStandbys, (peer) => this.rank(peer)),
        // A grant held past its wait (and at least this long) is answered T: never delivered after its lease.
        holdLimitMs: this.host.config['failover-timeout'],
      });
    }
    this.host.logger.info({ locks: table.size, replicated: replicated !== undefined, firstToken: this.tokenFor(table.nextToken).toString(), syncStandbys: this.syncStandbys }, 'active: table ready');
  }

  private rank(peer: string): number {
    return this.others.find((p) => p.name === peer)?.index ?? Infinity;
  }

  /** Stops serving (if it did): replies not acknowledged are dropped, clients go to `redirect`. */
  private stopServing(redirect: string): void {
    const source = this.source;
    if (source !== undefined) {
      this.machine.inherit(source.table.nextToken);
      this.source = undefined;
      if (this.syncStandbys > 0) this.host.setReplyGate(undefined);
    }
    this.host.stand(redirect);
  }

  /** The token the next grant gets: see hlc.ts. */
  private tokenFor(next: Token): Token {
    const seen = this.machine.highestToken;
    return nextToken(next > seen ? next : seen, this.host.clock.wallNow(), this.self.index);
  }

  /**
   * Called before each grant: the role machine must allow it (not paused,
   * not handing off), then the table's next token moves to the hybrid
   * clock's (locally: the replicated grant carries its token, so standbys
   * need no separate command), and it must be reserved on disk.
   */
  private admitToken(next: Token): boolean {
    const check = this.machine.grantCheck(this.now());
    if (check === 'tick' && !this.tickQueued) {
      // Long since the last tick: maybe this node was paused. The tick decides, right after this call.
      this.tickQueued = true;
      this.host.clock.defer(() => this.tick());
    }
    if (check !== 'yes' || this.source === undefined) return false;
    const table = this.source.table;
    const t = this.tokenFor(next);
    if (t > table.nextToken) table.apply({ type: 'token-floor', atLeast: t });
    return this.host.reserveTokens(t);
  }

  private diverged(why: string): void {
    this.host.logger.error({ why }, 'replica disagrees with the active node; resynchronising');
    this.replica.reset();
    const leader = this.machine.leader;
    if (leader !== undefined) this.links.reset(leader.name);
  }

  // --- acks ---

  private sendAck(): void {
    const leader = this.machine.leader;
    const claim = this.replica.claim();
    if (leader === undefined || claim === undefined || !claim.complete || claim.epoch !== this.machine.followedEpoch) return;
    this.links.send(leader.name, encodePeerMessage({ type: 'ack', epoch: claim.epoch, position: claim.position }));
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
      this.sendAck();
    };
    if (this.syncStandbys > 0) this.host.clock.soon(send);
    else this.host.clock.schedule(ACK_DELAY_MS, send);
  }
}

function roleName(role: string): PeerStatus['role'] {
  return role === 'active' ? 'active' : role === 'stopping' ? 'stopping' : 'standby';
}
