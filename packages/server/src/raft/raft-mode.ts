/**
 * Raft cluster mode (seed 001): the runtime around RaftCore. It does the I/O
 * (WAL and snapshots on disk, peer links), applies committed commands to the
 * lock table, and lets the leader serve clients.
 *
 * The leader runs the same lock engine as a single node, over a log that
 * applies each command to its table at once ("speculatively") and appends it
 * to the Raft log; every reply waits until the log index it depends on has
 * committed (the reply gate). So no client ever sees an effect that a new
 * leader could lose, and grants, hand-offs, lease expiry and ghost releases
 * work exactly as on a single node. If the node loses leadership, replies
 * that did not commit are dropped (their clients see an indeterminate
 * outcome), and the table is rebuilt from the last snapshot and the
 * committed log.
 *
 * Tokens are assigned when each node applies a Grant, so every node computes
 * the same ones; a new leader first proposes a token floor at the current
 * Unix time in microseconds, so tokens also grow if the cluster is rebuilt.
 * Lease deadlines run on each node's clock from its apply time; only the
 * leader proposes Expire, and a lock ends only when an Expire commits.
 */
import { loadPeerTls } from '../peers/peer-tls.js';
import type { TimerHandle } from '../seams/clock.js';
import { CorruptStorage, StorageError } from '../errors.js';
import { defaultPeerListen, parsePeers, type PeerInfo } from '../peers/members.js';
import { configurationOf, namesNotFlagged, namesNotHeld, peerInfos, peersFlag, type Configuration } from './configuration.js';
import { RaftMembership } from './membership.js';
import { clusterIdentity } from '../peers/cluster-identity.js';
import { PeerMesh, type MeshHandler } from '../peers/peer-mesh.js';
import type { NodeRole, PeerStatus, RaftLogView, RaftStatus } from '../node/node-view.js';
import type { ModeHost, NodeMode } from '../node/mode.js';
import { ReplyBarriers } from './reply-barriers.js';
import { SpeculativeLog } from './speculative-log.js';
import type { LeasedRecord } from '../engine/lock-engine.js';
import type { LockTable } from '../state-machine/lock-table.js';
import { AppliedState } from './applied-state.js';
import { clockFloor } from '../storage/token-reservation.js';
import { RaftCore } from './raft-core.js';
import { RaftStorage, snapshotText, type StoredSnapshot } from './raft-storage.js';
import { MAX_RAFT_LINE, SNAPSHOT_CHUNK, decodeRaftMessage, encodeRaftMessage, type RaftWire } from './raft-wire.js';
import { maxSnapshotChars, SnapshotReceiver, SnapshotSender } from './snapshot-transfer.js';
import type { Entry, Message, SnapshotMeta } from './types.js';

/**
 * An error from the disk (an errno from the seam, or one our storage raised
 * about the disk), as opposed to a fault of the code.
 */
function isStorageFailure(err: unknown): boolean {
  return err instanceof StorageError || err instanceof CorruptStorage || typeof (err as { code?: unknown }).code === 'string' && /^E[A-Z]+$/.test((err as { code: string }).code);
}

/** Raft ticks per heartbeat interval: the election timeout is counted in these ticks. */
const TICKS_PER_HEARTBEAT = 2;

export class RaftMode implements NodeMode, MeshHandler<RaftWire> {
  readonly name = 'raft';
  private readonly self: PeerInfo;
  /** The members, this node included, as the configuration in effect names them. */
  private members: PeerInfo[];
  /** What --peers says (a new cluster's configuration, and what the held one must agree with). */
  private readonly flagged: Configuration;
  /** The configuration the links and `members` were last set from. */
  private linkedConfig: Configuration | undefined;
  /** The last heartbeat's view of who the leader hears from, and when it came. */
  private leaderView: { readonly at: number; readonly reach: readonly string[] } | undefined;
  /** A SIGTERM hands leadership over: clients are redirected once the successor leads (see stepDown). */
  private handingOff = false;
  private redirectPending = false;
  readonly membership: RaftMembership;
  private readonly mesh: PeerMesh<RaftWire>;
  private core!: RaftCore;
  private storage!: RaftStorage;
  private state!: AppliedState;
  private log: SpeculativeLog | undefined;
  private looping = false;
  private loopAgain = false;
  private ticker: TimerHandle | undefined;
  private snapshotting = false;
  private stopped = false;
  /** What the replies of this node's leadership wait for (see releasedWhileLeading). */
  private barriers = new ReplyBarriers();
  /** The last of them met while this node led. */
  private released = 0;
  /** The term `log` was created in (this node serves clients as that term's leader). */
  private leadTerm = 0;
  /** Snapshot chunks arriving from the leader. */
  private readonly incoming: SnapshotReceiver;
  /** Snapshots going to followers, a window at a time. */
  private readonly outgoing: SnapshotSender;
  /** The last snapshot received whole, until the core accepts it. */
  private received: StoredSnapshot | undefined;
  /**
   * The data of the snapshot the core accepted, until the Ready loop installs
   * it: bound when the core takes it, so a newer snapshot arriving whole
   * meanwhile cannot take its place (D-8: install() threw, and the node stopped).
   */
  private accepted: StoredSnapshot | undefined;

  constructor(private readonly host: ModeHost) {
    const c = host.config;
    this.incoming = new SnapshotReceiver((err) => host.logger.warn({ err }, 'raft: received a damaged snapshot; waiting for another'), maxSnapshotChars(c['max-locks']));
    const peers = c.peers.length > 0 ? c.peers : [`${c.node}=${c.listen}`];
    this.members = parsePeers(peers);
    this.flagged = configurationOf(this.members);
    this.self = this.members.find((p) => p.name === c.node)!;
    this.membership = new RaftMembership({
      core: () => this.core,
      clock: host.clock,
      reachable: (name) => this.isReachable(name),
      reached: (path) => host.env.probes.reached(path),
      changed: () => {
        this.linkMembers();
        this.sendImmediate();
        this.kick();
      },
    });
    this.mesh = new PeerMesh(
      this.self,
      this.members.filter((p) => p.name !== this.self.name),
      loadPeerTls(c),
      host.env.transport,
      host.clock,
      host.logger,
      this,
      (buf, s, e) => decodeRaftMessage(buf.toString('utf8', s, e)),
      clusterIdentity('raft', this.members),
      MAX_RAFT_LINE,
      host.events,
      host.peerProtocols,
    );
    this.outgoing = new SnapshotSender(
      { backlog: (peer) => this.mesh.backlog(peer), send: (peer, line) => void this.mesh.send(peer, line) },
      encodeRaftMessage,
      undefined,
      // Fault point: a snapshot in tiny chunks, so a transfer takes many messages.
      () => (host.env.probes.buggify('raft.snapshot.tiny-chunks') ? 64 : SNAPSHOT_CHUNK),
    );
  }

  get role(): NodeRole {
    if (this.core === undefined) return 'follower';
    return this.core.role === 'pre-candidate' ? 'candidate' : this.core.role;
  }

  async start(): Promise<void> {
    const { storage, recovery } = await RaftStorage.open(this.host.env.disk, this.host.config['data-dir'], this.host.config['raft-join']);
    this.storage = storage;
    if (recovery.tornWrite) this.host.env.probes.reached('raft.wal.torn-write-cut');
    const tickMs = this.host.config['heartbeat-interval'] / TICKS_PER_HEARTBEAT;
    this.core = new RaftCore(
      {
        id: this.self.name,
        configuration: this.flagged,
        checkPeers: this.host.config.peers.length > 0,
        electionTicks: Math.max(TICKS_PER_HEARTBEAT * 2, Math.round(this.host.config['failover-timeout'] / tickMs)),
        heartbeatTicks: TICKS_PER_HEARTBEAT,
        random: this.host.env.random,
        // Fault point: appends of a few entries each, so a follower's catch-up takes many round trips.
        ...(this.host.env.probes.buggify('raft.append.few-entries') ? { maxEntriesPerAppend: 3 } : {}),
        // Fault point: a probe answered with the snapshot (the kept-suffix install on the follower).
        // One fault point for both sides of the kept-suffix install, so a seed that enables it
        // has followers that learn commits late and leaders that send them snapshots.
        snapshotForProbe: () => this.host.env.probes.buggify('raft.snapshot.over-suffix'),
        commitLate: () => this.host.env.probes.buggify('raft.snapshot.over-suffix'),
        joining: this.host.config['raft-join'],
      },
      recovery.state,
    );
    this.state = new AppliedState(this.host.engine.records, recovery.snapshot);
    this.linkMembers();
    const listen = this.host.config['peer-listen'] ?? defaultPeerListen(this.host.config.listen);
    const address = this.host.config.peers.length > 0 || this.members.length > 1 ? await this.mesh.listen(listen) : '(none: single-node Raft)';
    this.ticker = this.host.clock.every(tickMs, () => {
      // Fault point: a leader hands leadership over now and then, whatever is going on.
      if (this.log !== undefined && this.host.env.probes.buggify('raft.transfer.now')) this.core.transferLeadership();
      this.core.tick();
      this.checkRole(); // CheckQuorum may have deposed this leader
      this.outgoing.pumpAll(); // in case a drain was missed
      this.sendImmediate();
      this.kick();
    });
    this.host.logger.info(
      { peerListen: address, term: this.core.term, lastIndex: this.core.lastIndex, commit: this.core.commit, snapshot: recovery.snapshot?.meta.index ?? 0 },
      'raft: recovered; waiting for a leader',
    );
    this.kick();
  }

  async stop(): Promise<void> {
    if (this.log !== undefined && !this.stopped) await this.handOver();
    this.stopped = true;
    this.ticker?.cancel();
    if (this.log !== undefined) this.stepDown(this.mostCaughtUp());
    if (this.redirectPending) this.redirect(this.core.leader ?? this.core.transferTarget);
    await this.mesh.close();
    while (this.looping) await new Promise((r) => this.host.clock.schedule(5, () => r(undefined)));
    await this.storage.close();
  }

  /**
   * SIGTERM of a leader: it stops taking requests and hands leadership to the
   * most caught-up voter (TimeoutNow), which takes over in a round trip or two
   * instead of an election timeout; clients are redirected to it once it
   * leads. Bounded by the failover timeout (the successor may be gone).
   */
  private async handOver(): Promise<void> {
    this.host.pauseClients();
    this.host.engine.freeze();
    this.handingOff = true;
    try {
      await this.membership.transfer(undefined, this.host.config['failover-timeout']);
      this.host.env.probes.reached('raft.transfer.on-sigterm');
    } catch (err) {
      this.host.logger.warn({ err }, 'raft: could not hand leadership over before stopping');
    }
  }

  /** New certificates for peer links made from now on (SIGHUP), as in priority mode. */
  updateTls(): boolean {
    const tls = loadPeerTls(this.host.config);
    if (tls === undefined) return false;
    this.mesh.updateTls(tls);
    return true;
  }

  redirectTarget(): string | undefined {
    if (this.log !== undefined) return undefined;
    const leader = this.members.find((p) => p.name === this.core?.leader);
    return leader?.clientAddress ?? '-';
  }

  activeAddress(): string | undefined {
    return this.members.find((p) => p.name === this.core?.leader)?.clientAddress;
  }

  heldCount(): number {
    return this.state?.table.size ?? 0;
  }

  /** The applied table (a leader's runs ahead of the commit by what it proposed). */
  lockTable(): LockTable<LeasedRecord> | undefined {
    return this.state?.table;
  }

  peers(): PeerStatus[] {
    const progress = new Map(this.core?.followers().map((f) => [f.id, f]) ?? []);
    return this.members
      .filter((p) => p.name !== this.self.name)
      .map((p) => {
        const f = progress.get(p.name);
        const reachable = this.isReachable(p.name);
        const versions = this.mesh.linkVersions(p.name);
        return {
          name: p.name,
          address: p.clientAddress,
          role: p.name === this.core?.leader ? 'leader' : reachable ? 'follower' : 'unknown',
          reachable,
          ...(f === undefined ? {} : { lag: Math.max(0, this.core.lastIndex - f.match) }),
          ...(versions === undefined ? {} : { peerProtocol: versions }),
        };
      });
  }

  /**
   * Whether `name` is reachable, as the leader sees it: followers never talk
   * to each other, so a follower reports what the leader's heartbeats say
   * (the leader itself: heard from lately), and only without a leader its
   * own links (issue 27, item 7: healthy followers reported each other down).
   */
  private isReachable(name: string): boolean {
    const timeout = this.host.config['failover-timeout'];
    const leader = this.core?.leader;
    if (leader === undefined || leader === this.self.name || name === leader) return this.mesh.reachable(name, timeout);
    const view = this.leaderView;
    if (view === undefined || this.host.clock.now() - view.at >= timeout) return this.mesh.reachable(name, timeout);
    return view.reach.includes(name);
  }

  raftLog(): RaftLogView {
    const core = this.core;
    return {
      status: this.raftStatus(),
      servingTerm: this.log === undefined ? undefined : this.leadTerm,
      coreRole: this.core.role,
      termAt: (index) => core.termAt(index),
      commandAt: (index) => (index > core.snapshotIndex && index <= core.lastIndex ? core.slice(index, index)[0]?.command : undefined),
      durableIndex: core.durableIndex,
    };
  }

  raftStatus(): RaftStatus {
    return {
      term: this.core.term,
      leader: this.core.leader,
      commit: this.core.commit,
      applied: this.state.applied,
      lastIndex: this.core.lastIndex,
      snapshot: this.core.snapshotIndex,
      members: this.core.configuration.members,
      membershipIndex: this.core.configurationIndex,
      io: { walWrites: this.storage.writes.syncedWrites, walEntries: this.storage.writes.entries, appendsSent: this.sent.appends, appendEntriesSent: this.sent.entries },
    };
  }

  private foundersReported = 0;

  /** Empty nodes asked for votes with other --peers lists than this one's: say so, loudly, once each. */
  private reportFounders(): void {
    this.foundersReported = this.core.foundersDisagree.size;
    this.host.logger.error(
      { peers: [...this.core.foundersDisagree], ours: peersFlag(this.flagged) },
      'raft: nodes of a new cluster were started with different --peers lists (names): none of them founds a cluster until every node is given the same list',
    );
  }

  /** Points the peer links at the members of the configuration in effect, when it changed. */
  private linkMembers(): void {
    const c = this.core.configuration;
    if (c === this.linkedConfig) return;
    const first = this.linkedConfig === undefined;
    this.linkedConfig = c;
    this.members = peerInfos(c, this.flagged);
    this.mesh.setPeers(this.members.filter((p) => p.name !== this.self.name));
    const members = c.members.map((m) => `${m.name}${m.voter ? '' : ' (learner)'}`).join(', ');
    if (!first) this.host.logger.info({ members, index: this.core.configurationIndex }, 'raft: membership changed');
    const elsewhere = this.members.filter((p) => p.alternatePeerAddress !== undefined).map((p) => p.name);
    if (elsewhere.length > 0) this.host.logger.info({ members: elsewhere }, 'raft: --peers gives these members other addresses than the membership does; links try both');
    if (this.core.peersDisagree) {
      this.host.logger.warn(
        { held: peersFlag(c), flags: peersFlag(this.flagged), index: this.core.configurationIndex, notMembers: namesNotHeld(c, this.flagged) },
        `raft: --peers disagrees with the membership this node holds (log index ${this.core.configurationIndex}): it names ${namesNotHeld(c, this.flagged).join(', ')}, which the membership does not have, and this node will not stand for election until that is fixed. ` +
          `If the membership is right, restart it with --peers ${peersFlag(c)}; membership changes go through \`ticketing member\`. ` +
          'It follows a leader meanwhile (one that brings a newer membership ends this).',
      );
    } else if (this.host.config.peers.length > 0 && namesNotFlagged(c, this.flagged).length > 0) {
      this.host.logger.warn(
        { added: namesNotFlagged(c, this.flagged), index: this.core.configurationIndex },
        `raft: the membership has members --peers does not name: update --peers to ${peersFlag(c)} before this node's next restart`,
      );
    }
  }

  // --- messages in ---

  message(peer: string, m: RaftWire): void {
    if (this.stopped || m.from !== peer || m.to !== this.self.name) return;
    if (m.type === 'snapshot-chunk') {
      const whole = this.incoming.accept(m);
      if (whole !== undefined) this.received = whole;
      if (whole !== undefined && m.offset > 0) this.host.env.probes.reached('raft.snapshot.multi-chunk');
      return;
    }
    if (m.type === 'snapshot') {
      // Only step it once its data has fully arrived; otherwise the leader sends it again.
      if (this.received?.meta.index !== m.snapshot.index) return;
    }
    if (m.type === 'heartbeat' && m.term >= this.core.term) this.leaderView = { at: this.host.clock.now(), reach: m.reach };
    const commit = this.core.commit;
    const read = this.core.confirmedRead;
    this.core.step(m);
    if (m.type === 'snapshot' && this.core.pendingSnapshot?.index === m.snapshot.index) this.accepted = this.received;
    if (m.type === 'timeout-now' && this.core.role === 'candidate') this.host.env.probes.reached('raft.transfer');
    this.linkMembers();
    if (this.redirectPending && this.core.leader !== undefined && this.core.leader !== this.self.name) this.redirect(this.core.leader);
    if (this.core.foundersDisagree.size > this.foundersReported) this.reportFounders();
    // A message can depose this leader (or make this node one): act on it now, before the next
    // client request is read, not when the Ready loop next goes idle.
    this.checkRole();
    // A leader's replies wait only for the commit index and its leadership checks: release them now, not after the next fsync.
    if (this.log !== undefined && (this.core.commit > commit || this.core.confirmedRead > read)) this.host.commitAdvanced();
    this.sendImmediate();
    this.kick();
  }

  /** The leader's appends and heartbeats leave at once, even while a Ready waits for its fsync. */
  private sendImmediate(): void {
    for (const m of this.core.takeImmediate()) this.send(m);
  }

  outboundUp(): void {}
  outboundDown(peer: string): void {
    this.outgoing.pump(peer); // finds the link down and ends that transfer
  }
  outboundDrained(peer: string): void {
    this.outgoing.pump(peer);
  }
  inboundUp(): void {}
  inboundDown(): void {}
  ownError(peer: string, err: Error): void {
    this.host.internalError(err, `handling a Raft message from ${peer}`);
  }

  // --- messages out ---

  private send(m: Message): void {
    if (m.type === 'snapshot') {
      const s = this.state.snapshot;
      if (s === undefined || s.meta.index !== m.snapshot.index) return; // the core asks again later
      return this.outgoing.start(m, s); // the InstallSnapshot message follows its last chunk
    }
    // Heartbeats carry who this leader hears from (see isReachable).
    const wire: RaftWire = m.type === 'heartbeat' ? { ...m, reach: this.members.filter((p) => p.name !== this.self.name && this.mesh.reachable(p.name, this.host.config['failover-timeout'])).map((p) => p.name) } : m;
    this.mesh.send(m.to, encodeRaftMessage(wire));
    if (m.type === 'append') {
      this.sent.appends++;
      this.sent.entries += m.entries.length;
    }
  }

  /** Appends sent to followers and the entries they carried, since the start (/metrics). */
  private readonly sent = { appends: 0, entries: 0 };

  // --- the Ready loop ---

  private kick(): void {
    if (this.looping) {
      this.loopAgain = true;
      return;
    }
    this.looping = true;
    void this.loop();
  }

  private async loop(): Promise<void> {
    try {
      do {
        this.loopAgain = false;
        while (this.core.hasReady() && !this.stopped) {
          const rd = this.core.ready();
          for (const m of rd.sendNow) this.send(m);
          if (rd.snapshot !== undefined) await this.install(rd.snapshot, rd.entries);
          else await this.storage.save({ hardState: rd.hardState, truncateFrom: rd.truncateFrom, entries: rd.entries });
          for (const m of rd.sendAfterPersist) this.send(m);
          this.state.applyCommitted(rd.committed, this.log?.lastIndex ?? 0);
          this.core.advance(rd);
          this.host.commitAdvanced();
          // Under constant load the loop may never go idle: roles and snapshots are checked every pass.
          this.checkRole();
          this.maybeSnapshot();
        }
        this.checkRole();
        this.maybeSnapshot();
      } while (this.loopAgain && !this.stopped);
    } catch (err) {
      // A disk that failed stops the node; so does a fault of our own, reported as one (D-9).
      if (isStorageFailure(err)) this.failStorage(err as Error);
      else this.halt(() => this.host.internalError(err as Error, 'the Raft Ready loop', true));
    } finally {
      this.looping = false;
    }
  }

  /** A write failed: this node stops at once (what is durable is what it recovers from on restart). */
  private failStorage(err: Error): void {
    this.halt(() => {
      this.host.logger.error({ err }, 'raft: storage failed; stopping this node');
      this.host.fatal(err);
    });
  }

  /** Stops consensus at once (no more ticks, no more serving), then `stopNode` stops the node. */
  private halt(stopNode: () => void): void {
    if (this.stopped) return;
    this.stopped = true;
    this.ticker?.cancel();
    if (this.log !== undefined) this.stepDown(this.mostCaughtUp());
    stopNode();
  }

  /** A snapshot from the leader replaces our state (durably first), with the entries after it that the core kept. */
  private async install(meta: SnapshotMeta, tail: readonly Entry[]): Promise<void> {
    const s = this.accepted;
    if (s === undefined || s.meta.index !== meta.index) throw new StorageError(`raft: snapshot ${meta.index} accepted without its data`);
    this.accepted = undefined;
    if (this.received === s) this.received = undefined;
    // The entries the core kept after the snapshot (it keeps them when it holds the snapshot's last
    // entry): the new segment must carry them, or a crash after the old segments go loses them.
    await this.storage.saveSnapshot(s, this.core.hardState, tail);
    this.host.env.probes.reached(tail.length > 0 ? 'raft.install.kept-suffix' : 'raft.install');
    this.state.install(s);
    this.host.logger.info({ index: s.meta.index, locks: s.table.locks.length }, 'raft: installed a snapshot from the leader');
  }

  // --- leadership ---

  /**
   * Serves clients exactly while the core leads, in the term it leads: a
   * step-down and a re-election in a later term (even both between two
   * checks) end the old term's serving, so no reply waits on a gate bound to
   * a term that is over.
   */
  private checkRole(): void {
    const leading = this.core.role === 'leader' && !this.stopped;
    if (this.log !== undefined && (!leading || this.leadTerm !== this.core.term)) this.stepDown();
    if (leading && this.log === undefined) this.lead();
    this.logLeaderChange();
  }

  /** The leader this node last logged it follows (operators read whom a follower follows from the log). */
  private followed: string | undefined;

  private logLeaderChange(): void {
    const leader = this.core.leader === this.self.name || this.stopped ? undefined : this.core.leader;
    if (leader === this.followed) return;
    this.followed = leader;
    if (leader !== undefined) this.host.logger.info({ term: this.core.term, leader, leaderAddress: this.activeAddress() }, `raft: following leader ${leader}`);
  }

  /** This node won an election: bring the table up to the end of its log, then serve. */
  private lead(): void {
    this.state.catchUp(this.slice, this.core.snapshotIndex, this.core.lastIndex);
    const log = new SpeculativeLog(
      this.state.table,
      this.core,
      this.host.clock,
      () => {
        this.sendImmediate();
        this.kick();
        // A single node's leadership check is answered at once: its replies need no message.
        if (this.core.confirmedRead > this.released) this.host.commitAdvanced();
      },
      this.state,
    );
    this.log = log;
    // One token floor for every mode: the hybrid clock's scale (µs x 256, as a priority cluster's tokens),
    // and above the data directory's mark, whatever mode wrote it.
    const clock = clockFloor(this.host.clock.wallNow());
    const floor = this.host.tokenFloor > clock ? this.host.tokenFloor : clock;
    const next = this.state.table.nextToken;
    if (floor < next) {
      // Harmless for the tokens (the floor only raises them), but this leader's clock is behind an earlier one's.
      this.host.events.clockFloorWarnings++;
      this.host.logger.warn({ behindMicros: (next - floor).toString() }, 'raft: the clock is behind the tokens already issued');
    }
    log.apply({ type: 'token-floor', atLeast: floor });
    const term = this.core.term;
    this.leadTerm = term;
    const barriers = new ReplyBarriers();
    this.barriers = barriers;
    this.released = 0;
    this.host.setReplyGate({
      lastIndex: () => {
        const r = log.replyRequirement();
        return barriers.require(r.index, r.read);
      },
      commitIndex: () => this.releasedWhileLeading(term),
    });
    this.host.serve(log, () => true);
    this.host.logger.info({ term: this.core.term, lastIndex: this.core.lastIndex, locks: this.state.table.size }, 'raft: leader: serving clients');
  }

  /**
   * How far this node's replies may go out (reply-barriers.ts), as it knew
   * it while it led in `term`. Replies rest on its own log and leadership;
   * once it has stepped down, a commit index learned from a newer leader
   * covers entries that are not its own.
   */
  private releasedWhileLeading(term: number): number {
    if (this.core.role === 'leader' && this.core.term === term) this.released = this.barriers.release(this.core.commit, this.core.confirmedRead);
    return this.released;
  }

  /**
   * No longer leader: drop what did not commit, rebuild the committed table,
   * redirect clients: to the new leader when it is known, else to the
   * successor this node chose (it stops: SIGTERM, a storage failure), never to
   * itself (D-7).
   */
  private stepDown(successor?: string): void {
    const log = this.log!;
    this.log = undefined;
    this.outgoing.clear();
    log.proposeNow();
    this.host.setReplyGate(undefined);
    const next = this.core.leader !== undefined && this.core.leader !== this.self.name ? this.core.leader : successor;
    if (next === undefined && this.handingOff) {
      // Handing over (SIGTERM): the successor campaigns now. Redirect clients once it leads, so
      // they do not meet a candidate that answers `M -` (and wait out their reconnect cycle).
      this.host.engine.stop();
      this.redirectPending = true;
    } else this.redirect(next);
    this.state.rebuild(this.slice);
    // A leader that stops (SIGTERM) is still the leader in its own core: it must not name itself.
    // Handing over is a planned step-down too: info, naming the successor, not a warning.
    if (this.stopped || this.handingOff) this.host.logger.info({ term: this.core.term, ...(next === undefined ? {} : { successor: next }) }, 'raft: stopping: no longer serving clients');
    else this.host.logger.warn({ term: this.core.term, leader: this.core.leader ?? '-' }, 'raft: no longer leader');
  }

  /** Sends every client to `name`'s client address (`M -` when none, or when it is this node). */
  private redirect(name: string | undefined): void {
    this.redirectPending = false;
    this.host.stand(this.members.find((p) => p.name === name && p.name !== this.self.name)?.clientAddress ?? '-');
  }

  private readonly slice = (from: number, to: number): readonly Entry[] => this.core.slice(from, to);

  /** Leader: the follower whose log matches furthest (the likeliest next leader), if any. */
  private mostCaughtUp(): string | undefined {
    return this.core.followers().reduce<{ id: string; match: number } | undefined>((best, f) => (best === undefined || f.match > best.match ? f : best), undefined)?.id;
  }

  // --- snapshots ---

  private maybeSnapshot(): void {
    const applied = this.state.applied;
    if (this.snapshotting || this.stopped || applied <= this.core.snapshotIndex) return;
    // Fault point: a snapshot now, at whatever point the log is.
    if (applied - this.core.snapshotIndex < this.host.config['raft-snapshot-entries'] && !this.host.env.probes.buggify('raft.snapshot.now')) return;
    const meta = this.core.snapshotMeta(applied);
    // A leader's table is ahead of what committed: snapshot the committed state, rebuilt aside.
    const table = (this.log === undefined ? this.state.table : this.state.committedTable(this.slice)).snapshot();
    const stored: StoredSnapshot = { meta, table, text: snapshotText(meta, table) };
    this.snapshotting = true;
    const tail = this.core.slice(meta.index + 1, this.core.lastIndex);
    void this.storage
      .saveSnapshot(stored, this.core.hardState, tail)
      .then(() => {
        this.state.snapshot = stored;
        this.core.compact(meta.index);
        this.host.logger.info({ index: meta.index, locks: table.locks.length }, 'raft: snapshot taken; log compacted');
      })
      .catch((err: unknown) => {
        // The WAL may already be switched to a new segment: nothing after this can be trusted.
        this.failStorage(err as Error);
      })
      .finally(() => {
        this.snapshotting = false;
      });
  }
}
