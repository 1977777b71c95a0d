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
import { StorageError } from '../errors.js';
import { defaultPeerListen, parsePeers, type PeerInfo } from '../peers/members.js';
import { clusterIdentity } from '../peers/cluster-identity.js';
import { PeerMesh, type MeshHandler } from '../peers/peer-mesh.js';
import type { NodeRole, PeerStatus, RaftLogView, RaftStatus } from '../node/node-view.js';
import type { ModeHost, NodeMode } from '../node/mode.js';
import { SpeculativeLog } from './speculative-log.js';
import type { LeasedRecord } from '../engine/lock-engine.js';
import type { LockTable } from '../state-machine/lock-table.js';
import { AppliedState } from './applied-state.js';
import { clockFloor } from '../storage/token-reservation.js';
import { RaftCore } from './raft-core.js';
import { RaftStorage, snapshotText, type StoredSnapshot } from './raft-storage.js';
import { MAX_RAFT_LINE, decodeRaftMessage, encodeRaftMessage, type RaftWire } from './raft-wire.js';
import { maxSnapshotChars, SnapshotReceiver, SnapshotSender } from './snapshot-transfer.js';
import type { Entry, Message, SnapshotMeta } from './types.js';

/** Raft ticks per heartbeat interval: the election timeout is counted in these ticks. */
const TICKS_PER_HEARTBEAT = 2;

export class RaftMode implements NodeMode, MeshHandler<RaftWire> {
  readonly name = 'raft';
  private readonly self: PeerInfo;
  private readonly members: PeerInfo[];
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
  /** Highest commit index seen while this node led (see commitWhileLeading). */
  private leaderCommit = 0;
  /** The term `log` was created in (this node serves clients as that term's leader). */
  private leadTerm = 0;
  /** Snapshot chunks arriving from the leader. */
  private readonly incoming: SnapshotReceiver;
  /** Snapshots going to followers, a window at a time. */
  private readonly outgoing: SnapshotSender;
  /** The last snapshot received whole, until the core accepts it. */
  private received: StoredSnapshot | undefined;

  constructor(private readonly host: ModeHost) {
    const c = host.config;
    this.incoming = new SnapshotReceiver((err) => host.logger.warn({ err }, 'raft: received a damaged snapshot; waiting for another'), maxSnapshotChars(c['max-locks']));
    const peers = c.peers.length > 0 ? c.peers : [`${c.node}=${c.listen}`];
    this.members = parsePeers(peers);
    this.self = this.members.find((p) => p.name === c.node)!;
    this.mesh = new PeerMesh(
      this.self,
      this.members.filter((p) => p !== this.self),
      loadPeerTls(c),
      host.env.transport,
      host.clock,
      host.logger,
      this,
      (buf, s, e) => decodeRaftMessage(buf.toString('utf8', s, e)),
      clusterIdentity('raft', this.members),
      MAX_RAFT_LINE,
      host.events,
    );
    this.outgoing = new SnapshotSender(
      { backlog: (peer) => this.mesh.backlog(peer), send: (peer, line) => void this.mesh.send(peer, line) },
      encodeRaftMessage,
    );
  }

  get role(): NodeRole {
    if (this.core === undefined) return 'follower';
    return this.core.role === 'pre-candidate' ? 'candidate' : this.core.role;
  }

  async start(): Promise<void> {
    const { storage, recovery } = await RaftStorage.open(this.host.env.disk, this.host.config['data-dir'], this.host.config['raft-join']);
    this.storage = storage;
    const tickMs = this.host.config['heartbeat-interval'] / TICKS_PER_HEARTBEAT;
    this.core = new RaftCore(
      {
        id: this.self.name,
        peers: this.members.map((p) => p.name),
        electionTicks: Math.max(TICKS_PER_HEARTBEAT * 2, Math.round(this.host.config['failover-timeout'] / tickMs)),
        heartbeatTicks: TICKS_PER_HEARTBEAT,
        random: this.host.env.random,
        joining: this.host.config['raft-join'],
      },
      recovery.state,
    );
    this.state = new AppliedState(this.host.engine.records, recovery.snapshot);
    const listen = this.host.config['peer-listen'] ?? defaultPeerListen(this.host.config.listen);
    const address = this.members.length > 1 ? await this.mesh.listen(listen) : '(none: single-node Raft)';
    this.ticker = this.host.clock.every(tickMs, () => {
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
    this.stopped = true;
    this.ticker?.cancel();
    if (this.log !== undefined) this.stepDown();
    await this.mesh.close();
    while (this.looping) await new Promise((r) => this.host.clock.schedule(5, () => r(undefined)));
    await this.storage.close();
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
      .filter((p) => p !== this.self)
      .map((p) => {
        const f = progress.get(p.name);
        const reachable = this.mesh.reachable(p.name, this.host.config['failover-timeout']);
        return {
          name: p.name,
          address: p.clientAddress,
          role: p.name === this.core?.leader ? 'leader' : reachable ? 'follower' : 'unknown',
          reachable,
          ...(f === undefined ? {} : { lag: Math.max(0, this.core.lastIndex - f.match) }),
        };
      });
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
    };
  }

  // --- messages in ---

  message(peer: string, m: RaftWire): void {
    if (this.stopped || m.from !== peer || m.to !== this.self.name) return;
    if (m.type === 'snapshot-chunk') {
      const whole = this.incoming.accept(m);
      if (whole !== undefined) this.received = whole;
      return;
    }
    if (m.type === 'snapshot') {
      // Only step it once its data has fully arrived; otherwise the leader sends it again.
      if (this.received?.meta.index !== m.snapshot.index) return;
    }
    const commit = this.core.commit;
    this.core.step(m);
    // A message can depose this leader (or make this node one): act on it now, before the next
    // client request is read, not when the Ready loop next goes idle.
    this.checkRole();
    // A leader's replies wait only for the commit index: release them now, not after the next fsync.
    if (this.log !== undefined && this.core.commit > commit) this.host.commitAdvanced();
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

  // --- messages out ---

  private send(m: Message): void {
    if (m.type === 'snapshot') {
      const s = this.state.snapshot;
      if (s === undefined || s.meta.index !== m.snapshot.index) return; // the core asks again later
      return this.outgoing.start(m, s); // the InstallSnapshot message follows its last chunk
    }
    this.mesh.send(m.to, encodeRaftMessage(m));
  }

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
          if (rd.snapshot !== undefined) await this.install(rd.snapshot);
          await this.storage.save({ hardState: rd.hardState, truncateFrom: rd.truncateFrom, entries: rd.entries });
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
      this.failStorage(err as Error);
    } finally {
      this.looping = false;
    }
  }

  /** A write failed: this node stops at once (what is durable is what it recovers from on restart). */
  private failStorage(err: Error): void {
    if (this.stopped) return;
    this.host.logger.error({ err }, 'raft: storage failed; stopping this node');
    this.stopped = true;
    this.ticker?.cancel();
    if (this.log !== undefined) this.stepDown();
    this.host.fatal(err);
  }

  /** A snapshot from the leader replaces our state (durably first). */
  private async install(meta: SnapshotMeta): Promise<void> {
    const s = this.received;
    if (s === undefined || s.meta.index !== meta.index) throw new StorageError(`raft: snapshot ${meta.index} accepted without its data`);
    this.received = undefined;
    // The entries the core kept after the snapshot (it keeps them when it holds the snapshot's last
    // entry): the new segment must carry them, or a crash after the old segments go loses them.
    const tail = this.core.slice(meta.index + 1, this.core.lastIndex);
    await this.storage.saveSnapshot(s, { term: this.core.term, vote: this.core.vote, commit: this.core.commit }, tail);
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
    const log = new SpeculativeLog(this.state.table, this.core, this.host.clock, () => {
      this.sendImmediate();
      this.kick();
    });
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
    this.leaderCommit = this.core.commit;
    this.host.setReplyGate({ lastIndex: () => log.replyIndex(), commitIndex: () => this.commitWhileLeading(term) });
    this.host.serve(log, () => true);
    this.host.logger.info({ term: this.core.term, lastIndex: this.core.lastIndex, locks: this.state.table.size }, 'raft: leader: serving clients');
  }

  /**
   * The commit index as this node knew it while it led in `term`. Replies
   * carry indexes of its own log; once it has stepped down, a commit index
   * learned from a newer leader covers entries that are not its own.
   */
  private commitWhileLeading(term: number): number {
    if (this.core.role === 'leader' && this.core.term === term && this.core.commit > this.leaderCommit) this.leaderCommit = this.core.commit;
    return this.leaderCommit;
  }

  /** No longer leader: drop what did not commit, rebuild the committed table, redirect clients. */
  private stepDown(): void {
    const log = this.log!;
    this.log = undefined;
    this.outgoing.clear();
    log.proposeNow();
    this.host.setReplyGate(undefined);
    const leader = this.members.find((p) => p.name === this.core.leader);
    this.host.stand(leader?.clientAddress ?? '-');
    this.state.rebuild(this.slice);
    // A leader that stops (SIGTERM) is still the leader in its own core: it must not name itself.
    if (this.stopped) this.host.logger.info({ term: this.core.term }, 'raft: stopping: no longer serving clients');
    else this.host.logger.warn({ term: this.core.term, leader: this.core.leader ?? '-' }, 'raft: no longer leader');
  }

  private readonly slice = (from: number, to: number): readonly Entry[] => this.core.slice(from, to);

  // --- snapshots ---

  private maybeSnapshot(): void {
    const applied = this.state.applied;
    if (this.snapshotting || this.stopped || applied - this.core.snapshotIndex < this.host.config['raft-snapshot-entries']) return;
    const meta = { index: applied, term: this.core.termAt(applied)! };
    // A leader's table is ahead of what committed: snapshot the committed state, rebuilt aside.
    const table = (this.log === undefined ? this.state.table : this.state.committedTable(this.slice)).snapshot();
    const stored: StoredSnapshot = { meta, table, text: snapshotText(meta, table) };
    this.snapshotting = true;
    const tail = this.core.slice(meta.index + 1, this.core.lastIndex);
    void this.storage
      .saveSnapshot(stored, { term: this.core.term, vote: this.core.vote, commit: this.core.commit }, tail)
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
