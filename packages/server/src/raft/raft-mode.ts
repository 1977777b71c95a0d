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
import { leasedRecord, type CommandLog, type LeasedRecord } from '../engine/lock-engine.js';
import { loadTls } from '../net/tls-config.js';
import { joinHostPort, splitHostPort } from '../net/address.js';
import { parsePeers } from '../cluster/priority-mode.js';
import { PeerMesh, type MeshHandler, type PeerInfo } from '../cluster/peer-mesh.js';
import type { NodeRole, PeerStatus, RaftStatus } from '../node/node-view.js';
import type { ModeHost, NodeMode } from '../node/ticketing-node.js';
import type { Command, Result } from '../state-machine/commands.js';
import { LockTable } from '../state-machine/lock-table.js';
import { unixMicros } from '../storage/token-reservation.js';
import { decodeCommand, encodeCommand } from './commands.js';
import { RaftCore } from './raft-core.js';
import { RaftStorage, parseSnapshotText, snapshotText, type StoredSnapshot } from './raft-storage.js';
import { MAX_RAFT_LINE, SNAPSHOT_CHUNK, decodeRaftMessage, encodeRaftMessage, type RaftWire } from './raft-wire.js';
import type { Entry, Message, SnapshotMeta } from './types.js';

/** Raft ticks per heartbeat interval: the election timeout is counted in these ticks. */
const TICKS_PER_HEARTBEAT = 2;

/**
 * The leader's command log: applies each command to the table at once and
 * appends it to the Raft log (batched once per event-loop turn).
 */
class SpeculativeLog implements CommandLog {
  private batch: string[] = [];
  private queued = false;

  constructor(
    readonly table: LockTable,
    private readonly core: RaftCore,
    /** Sends what may leave at once (the appends just made), and runs the Ready loop. */
    private readonly proposed: () => void,
  ) {}

  apply(command: Command): Result {
    const result = this.table.apply(command);
    this.batch.push(encodeCommand(command));
    if (!this.queued) {
      this.queued = true;
      // After every connection's input of this turn: one batch, one append to each follower.
      setImmediate(() => this.proposeNow());
    }
    return result;
  }

  /** The index the last applied command has (or will have) in the log. */
  get lastIndex(): number {
    return this.core.lastIndex + this.batch.length;
  }

  /**
   * The log index a reply written now must wait for. A reply that changed
   * nothing this turn (T, N, P...) still waits for a fresh entry of this
   * turn: a no-op, at most one per turn. Its commit proves this node was
   * still the leader after it decided (a read barrier), so it never answers
   * from a state a newer leader has already changed.
   */
  replyIndex(): number {
    if (this.batch.length === 0) this.apply({ type: 'noop' });
    return this.lastIndex;
  }

  proposeNow(): void {
    this.queued = false;
    if (this.batch.length === 0) return;
    const batch = this.batch;
    this.batch = [];
    this.core.propose(batch);
    this.proposed();
  }
}

export class RaftMode implements NodeMode, MeshHandler<RaftWire> {
  readonly name = 'raft';
  private readonly self: PeerInfo;
  private readonly members: PeerInfo[];
  private readonly mesh: PeerMesh<RaftWire>;
  private core!: RaftCore;
  private storage!: RaftStorage;
  /** The lock table: committed state, or (leader) ahead of it by what it proposed. */
  private table!: LockTable;
  private applied = 0;
  private snapshot: StoredSnapshot | undefined;
  private log: SpeculativeLog | undefined;
  private looping = false;
  private loopAgain = false;
  private ticker: NodeJS.Timeout | undefined;
  private snapshotting = false;
  private stopped = false;
  /** Highest commit index seen while this node led (see commitWhileLeading). */
  private leaderCommit = 0;
  /** Snapshot chunks arriving from the leader, by snapshot index. */
  private incoming: { index: number; parts: string[] } | undefined;
  private received: StoredSnapshot | undefined;

  constructor(private readonly host: ModeHost) {
    const c = host.config;
    const peers = c.peers.length > 0 ? c.peers : [`${c.node}=${c.listen}`];
    this.members = parsePeers(peers);
    this.self = this.members.find((p) => p.name === c.node)!;
    const tls = loadTls(c);
    this.mesh = new PeerMesh(
      this.self,
      this.members.filter((p) => p !== this.self),
      c['peer-token'],
      tls && { context: tls.context },
      host.clock,
      host.logger,
      this,
      (buf, s, e) => decodeRaftMessage(buf.toString('utf8', s, e)),
      MAX_RAFT_LINE,
    );
  }

  get role(): NodeRole {
    if (this.core === undefined) return 'follower';
    return this.core.role === 'pre-candidate' ? 'candidate' : this.core.role;
  }

  async start(): Promise<void> {
    const { storage, recovery } = await RaftStorage.open(this.host.config['data-dir']);
    this.storage = storage;
    this.snapshot = recovery.snapshot;
    const tickMs = this.host.config['heartbeat-interval'] / TICKS_PER_HEARTBEAT;
    this.core = new RaftCore(
      {
        id: this.self.name,
        peers: this.members.map((p) => p.name),
        electionTicks: Math.max(TICKS_PER_HEARTBEAT * 2, Math.round(this.host.config['failover-timeout'] / tickMs)),
        heartbeatTicks: TICKS_PER_HEARTBEAT,
        random: Math.random,
        joining: this.host.config['raft-join'],
      },
      recovery.state,
    );
    this.table = this.restoreTable(this.snapshot);
    this.applied = this.snapshot?.meta.index ?? 0;
    const listen = this.host.config['peer-listen'] ?? defaultPeerListen(this.host.config.listen);
    const address = this.members.length > 1 ? await this.mesh.listen(listen) : '(none: single-node Raft)';
    this.ticker = setInterval(() => {
      this.core.tick();
      this.sendImmediate();
      this.kick();
    }, tickMs);
    this.host.logger.info(
      { peerListen: address, term: this.core.term, lastIndex: this.core.lastIndex, commit: this.core.commit, snapshot: this.snapshot?.meta.index ?? 0 },
      'raft: recovered; waiting for a leader',
    );
    this.kick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.ticker);
    if (this.log !== undefined) this.stepDown();
    await this.mesh.close();
    while (this.looping) await new Promise((r) => setTimeout(r, 5));
    await this.storage.close();
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
    return this.table?.size ?? 0;
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

  raftStatus(): RaftStatus {
    return {
      term: this.core.term,
      leader: this.core.leader,
      commit: this.core.commit,
      applied: this.applied,
      lastIndex: this.core.lastIndex,
      snapshot: this.core.snapshotIndex,
    };
  }

  // --- messages in ---

  message(peer: string, m: RaftWire): void {
    if (this.stopped || m.from !== peer || m.to !== this.self.name) return;
    if (m.type === 'snapshot-chunk') return this.receiveChunk(m);
    if (m.type === 'snapshot') {
      // Only step it once its data has fully arrived; otherwise the leader sends it again.
      if (this.received?.meta.index !== m.snapshot.index) return;
    }
    const commit = this.core.commit;
    this.core.step(m);
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
  outboundDown(): void {}
  inboundUp(): void {}
  inboundDown(): void {}

  private receiveChunk(c: Extract<RaftWire, { type: 'snapshot-chunk' }>): void {
    if (c.offset === 0) this.incoming = { index: c.index, parts: [] };
    const inc = this.incoming;
    if (inc === undefined || inc.index !== c.index || inc.parts.length !== c.offset) {
      this.incoming = undefined; // a chunk went missing: wait for the leader to start over
      return;
    }
    inc.parts.push(c.data);
    if (c.last) {
      this.incoming = undefined;
      try {
        this.received = parseSnapshotText(inc.parts.join(''));
      } catch (err) {
        this.host.logger.warn({ err: (err as Error).message }, 'raft: received a damaged snapshot; waiting for another');
      }
    }
  }

  // --- messages out ---

  private send(m: Message): void {
    if (m.type === 'snapshot') {
      const s = this.snapshot;
      if (s === undefined || s.meta.index !== m.snapshot.index) return; // the core asks again later
      const text = s.text;
      let part = 0;
      for (let offset = 0; offset < text.length; offset += SNAPSHOT_CHUNK) {
        this.mesh.send(
          m.to,
          encodeRaftMessage({ type: 'snapshot-chunk', from: m.from, to: m.to, term: m.term, index: s.meta.index, offset: part++, last: offset + SNAPSHOT_CHUNK >= text.length, data: text.slice(offset, offset + SNAPSHOT_CHUNK) }),
        );
      }
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
          this.applyCommitted(rd.committed);
          this.core.advance(rd);
          this.host.commitAdvanced();
        }
        this.checkRole();
        this.maybeSnapshot();
      } while (this.loopAgain && !this.stopped);
    } catch (err) {
      this.host.logger.error({ err: (err as Error).message }, 'raft: storage failed; stopping this node');
      this.stopped = true;
      clearInterval(this.ticker);
      if (this.log !== undefined) this.stepDown();
      this.host.fatal(err as Error);
    } finally {
      this.looping = false;
    }
  }

  private applyCommitted(entries: readonly Entry[]): void {
    const now = this.host.clock.now();
    for (const e of entries) {
      if (e.index <= this.applied) continue;
      this.applied = e.index;
      // The leader applied its own entries when it proposed them.
      if (this.log !== undefined && e.index <= this.log.lastIndex) continue;
      this.applyEntry(e, now);
    }
  }

  private applyEntry(e: Entry, now: number, table = this.table): void {
    const r = table.apply(decodeCommand(e.command));
    // Each node tracks a lease from its own apply time: never earlier than the leader that granted it.
    if (r.type === 'granted') (r.record as LeasedRecord).due = now + r.record.leaseMs;
  }

  /** A snapshot from the leader replaces our state (durably first). */
  private async install(meta: SnapshotMeta): Promise<void> {
    const s = this.received;
    if (s === undefined || s.meta.index !== meta.index) throw new Error(`raft: snapshot ${meta.index} accepted without its data`);
    this.received = undefined;
    await this.storage.saveSnapshot(s, { term: this.core.term, vote: this.core.vote, commit: this.core.commit }, []);
    this.snapshot = s;
    this.table = this.restoreTable(s);
    this.applied = s.meta.index;
    this.host.logger.info({ index: s.meta.index, locks: s.table.locks.length }, 'raft: installed a snapshot from the leader');
  }

  private restoreTable(s: StoredSnapshot | undefined): LockTable {
    if (s === undefined) return new LockTable(1n, leasedRecord);
    const table = LockTable.restore(s.table, leasedRecord);
    const due = this.host.clock.now();
    for (const r of table.records()) (r as LeasedRecord).due = due + r.leaseMs;
    return table;
  }

  // --- leadership ---

  private checkRole(): void {
    const leading = this.core.role === 'leader';
    if (leading && this.log === undefined && !this.stopped) this.lead();
    else if (!leading && this.log !== undefined) this.stepDown();
  }

  /** This node won an election: bring the table up to the end of its log, then serve. */
  private lead(): void {
    const now = this.host.clock.now();
    // Entries after `applied` are not committed yet, but they are ours to commit now.
    if (this.core.lastIndex > this.applied) {
      for (const e of this.core.slice(Math.max(this.applied, this.core.snapshotIndex) + 1, this.core.lastIndex)) this.applyEntry(e, now);
    }
    const log = new SpeculativeLog(this.table, this.core, () => {
      this.sendImmediate();
      this.kick();
    });
    this.log = log;
    const floor = unixMicros();
    if (floor < this.table.nextToken) {
      // Harmless for the tokens (the floor only raises them), but this leader's clock is behind an earlier one's.
      this.host.events.clockFloorWarnings++;
      this.host.logger.warn({ behindMicros: (this.table.nextToken - floor).toString() }, 'raft: the clock is behind the tokens already issued');
    }
    log.apply({ type: 'token-floor', atLeast: floor });
    const term = this.core.term;
    this.leaderCommit = this.core.commit;
    this.host.setReplyGate({ lastIndex: () => log.replyIndex(), commitIndex: () => this.commitWhileLeading(term) });
    this.host.serve(log, () => true);
    this.host.logger.info({ term: this.core.term, lastIndex: this.core.lastIndex, locks: this.table.size }, 'raft: leader: serving clients');
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
    log.proposeNow();
    this.host.setReplyGate(undefined);
    const leader = this.members.find((p) => p.name === this.core.leader);
    this.host.stand(leader?.clientAddress ?? '-');
    this.table = this.committedTable();
    this.host.logger.warn({ term: this.core.term, leader: this.core.leader ?? '-' }, 'raft: no longer leader: following');
  }

  /** The table as of the applied index: the last snapshot and the committed entries after it. */
  private committedTable(): LockTable {
    const table = this.restoreTable(this.snapshot);
    const from = (this.snapshot?.meta.index ?? 0) + 1;
    const now = this.host.clock.now();
    if (this.applied >= from) for (const e of this.core.slice(from, this.applied)) this.applyEntry(e, now, table);
    return table;
  }

  // --- snapshots ---

  private maybeSnapshot(): void {
    if (this.snapshotting || this.stopped || this.applied - this.core.snapshotIndex < this.host.config['raft-snapshot-entries']) return;
    const meta = { index: this.applied, term: this.core.termAt(this.applied)! };
    // A leader's table is ahead of what committed: snapshot the committed state, rebuilt aside.
    const table = (this.log === undefined ? this.table : this.committedTable()).snapshot();
    const stored: StoredSnapshot = { meta, table, text: snapshotText(meta, table) };
    this.snapshotting = true;
    const tail = this.core.slice(meta.index + 1, this.core.lastIndex);
    void this.storage
      .saveSnapshot(stored, { term: this.core.term, vote: this.core.vote, commit: this.core.commit }, tail)
      .then(() => {
        this.snapshot = stored;
        this.core.compact(meta.index);
        this.host.logger.info({ index: meta.index, locks: table.locks.length }, 'raft: snapshot taken; log compacted');
      })
      .catch((err: unknown) => {
        this.host.events.diskErrors++;
        this.host.logger.error({ err: (err as Error).message }, 'raft: snapshot failed');
      })
      .finally(() => {
        this.snapshotting = false;
      });
  }
}

function defaultPeerListen(listen: string): string {
  const { host, port } = splitHostPort(listen);
  return joinHostPort(host, port + 1);
}
