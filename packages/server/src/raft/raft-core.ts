/**
 * The Raft consensus algorithm as a pure, deterministic object, modelled on
 * etcd-io/raft: it is driven by `tick()` and `step(message)` and `propose()`,
 * and tells its runtime what to persist, what to send and what to apply
 * through `ready()`; the runtime does all disk and network I/O, then calls
 * `advance()`. No clock, no I/O, no randomness except the injected `random`
 * used for election timeouts.
 *
 * Beyond the paper: PreVote (a node that was partitioned away asks first
 * whether it could win, so its return does not disrupt a healthy leader) and
 * CheckQuorum (a leader that has not heard from a majority for an election
 * timeout steps down; followers that heard from a leader within the election
 * timeout refuse to vote, which PreVote needs); membership changes through
 * the log, one voter at a time, with learners that catch up before they
 * vote (configuration.ts; Raft thesis 4.1); leadership transfer (TimeoutNow,
 * thesis 3.10); ReadIndex leadership checks (thesis 6.4).
 */
import { PeerProtocolError, SafetyViolation } from '../errors.js';
import { checkConfiguration, decodeConfiguration, encodeConfiguration, isConfigurationCommand, namesNotHeld, voters, type Configuration } from './configuration.js';
import type { Entry, HardState, Membership, Message, Ready, SnapshotMeta } from './types.js';

export type RaftRole = 'follower' | 'pre-candidate' | 'candidate' | 'leader';

export interface RaftOptions {
  readonly id: string;
  /** Every member, this node included, all voters (tests; a node passes `configuration`). */
  readonly peers?: readonly string[];
  /**
   * The configuration `--peers` names: what a new cluster starts with, and
   * what the configuration this node holds (the latest in its log) must agree
   * with before it campaigns (`peersDisagree`).
   */
  readonly configuration?: Configuration;
  /** Campaign only while the configuration held agrees with `configuration` (false: --peers was not given). */
  readonly checkPeers?: boolean;
  /** Election timeout in ticks: randomised in [electionTicks, 2 * electionTicks). */
  readonly electionTicks: number;
  readonly heartbeatTicks: number;
  readonly random: () => number;
  readonly maxEntriesPerAppend?: number;
  readonly maxInflightAppends?: number;
  /**
   * Fault point (the simulator's; never in production): answer a probe with
   * the snapshot although the log has the entries, as a leader that compacted
   * a moment earlier would. A follower that holds the snapshot's last entry
   * then keeps its suffix: the rare install path.
   */
  readonly snapshotForProbe?: () => boolean;
  /**
   * Fault point (the simulator's; never in production): a follower takes the
   * commit index a leader's message carries late (the next message carries it
   * again), as a follower cut off right after its ack would; a snapshot then
   * reaches it while it holds the snapshot's last entry but not its commit,
   * which is when it keeps its suffix.
   */
  readonly commitLate?: () => boolean;
  /**
   * A node that lost its state (replaced with an empty data directory) may
   * have voted in the current term before: it must not vote again until it
   * has heard from a leader.
   */
  readonly joining?: boolean;
}

/** What a node recovered from its disk. */
export interface RaftRecovered {
  readonly hardState: HardState;
  readonly snapshot: SnapshotMeta;
  /** Entries after the snapshot, in order. */
  readonly entries: readonly Entry[];
}

/** The leader's view of one follower. */
class Progress {
  match = 0;
  next: number;
  /** Heard from since the last CheckQuorum round. */
  active = false;
  /** One append at a time until the follower's log position is found. */
  probing = true;
  inflight = 0;
  /** Some append response arrived since the last heartbeat (else appends may be lost: probe again). */
  responded = false;
  snapshotSent = false;

  constructor(next: number) {
    this.next = next;
  }
}

export class RaftCore {
  readonly id: string;
  term = 0;
  vote: string | undefined;
  commit = 0;
  role: RaftRole = 'follower';
  leader: string | undefined;

  /** The configuration `--peers` describes (see RaftOptions.configuration). */
  private readonly bootstrap: Configuration;
  /** The configuration in effect: the latest in the log, else the snapshot's, else `bootstrap`. */
  private config: Configuration;
  /** The log index `config` comes from (the snapshot's index for its own; 0 for `bootstrap`). */
  private configIndex = 0;
  /** `config` is this node's own (its log or snapshot holds it), not the bootstrap one. */
  private configHeld = false;
  /** The snapshot's configuration, when it carries one. */
  private snapConfig: Configuration | undefined;
  private voterIds: readonly string[] = [];
  /** Every member but this node (voters and learners: the leader replicates to all of them). */
  private others: readonly string[] = [];
  private quorum = 1;
  /** Leader: the first index of its term (its no-op): a membership change waits until it commits. */
  private termStart = 0;
  /** Leader: the voter it is handing leadership to, and for how many ticks it has tried. */
  private transferee: string | undefined;
  private transferElapsed = 0;
  private snap: SnapshotMeta = { index: 0, term: 0 };
  /** entries[i].index === snap.index + 1 + i */
  private entries: Entry[] = [];
  private stable = 0;
  private unstableFrom = 1;
  private truncatedFrom: number | undefined;
  private applied = 0;
  private snapshotToInstall: SnapshotMeta | undefined;
  private hardDirty = false;
  /**
   * The commit index moved since the hard state was last written. It is
   * written with the next entries (or term, vote, membership), never on its
   * own: a record for it alone cost every commit one more synced write on
   * each node (and three nodes on one disk take turns at it). The paper keeps
   * it volatile; on disk it is a lower bound that a restart starts from, and
   * the leader tells a node the rest.
   */
  private commitDirty = false;
  private electionElapsed = 0;
  private heartbeatElapsed = 0;
  private timeout = 0;
  private readonly votes = new Map<string, boolean>();
  /** Voters that answered this PreVote round holding nothing (see handleVoteResponse). */
  private readonly emptyVoters = new Set<string>();
  private readonly progress = new Map<string, Progress>();
  private outNow: Message[] = [];
  private outAfter: Message[] = [];
  private readonly maxEntries: number;
  private readonly maxInflight: number;
  /** Joining: the leader's commit index at first contact, which this node must reach to vote again. */
  private joinTarget: number | undefined;
  /** See Membership: persisted with the hard state, so a restart does not forget that it is joining. */
  private membership: Membership;
  /** Leader: the latest leadership check started (see confirmRead), and the latest each follower answered. */
  private readRound = 0;
  private readonly readAcks = new Map<string, number>();

  constructor(
    private readonly options: RaftOptions,
    recovered?: RaftRecovered,
  ) {
    this.id = options.id;
    this.bootstrap = options.configuration ?? { members: [...new Set(options.peers ?? [])].map((name) => ({ name, address: `${name}:5225`, voter: true })) };
    checkConfiguration(this.bootstrap);
    if (!this.bootstrap.members.some((m) => m.name === this.id)) throw new Error(`node ${this.id} is not one of the peers`);
    this.config = this.bootstrap;
    this.maxEntries = options.maxEntriesPerAppend ?? 1024;
    this.maxInflight = options.maxInflightAppends ?? 256;
    const recorded = recovered?.hardState.membership ?? (recovered === undefined ? 'unknown' : 'member');
    this.membership = options.joining === true ? 'joining' : recorded;
    // What the disk says must be on it before anything else this node sends.
    this.hardDirty = this.membership !== recorded;
    if (recovered !== undefined) {
      this.term = recovered.hardState.term;
      this.vote = recovered.hardState.vote;
      this.snap = recovered.snapshot;
      this.entries = [...recovered.entries];
      this.commit = Math.max(recovered.hardState.commit, recovered.snapshot.index);
      this.applied = recovered.snapshot.index;
      this.stable = this.lastIndex;
      this.unstableFrom = this.lastIndex + 1;
      if (recovered.snapshot.members !== undefined) this.snapConfig = decodeConfiguration(recovered.snapshot.members);
    }
    this.refreshConfiguration();
    this.resetTimeout();
  }

  // --- membership ---

  /** The configuration in effect (the latest this node holds, committed or not: thesis 4.1). */
  get configuration(): Configuration {
    return this.config;
  }

  /** The log index of the configuration in effect (0: none held yet; --peers describes the cluster). */
  get configurationIndex(): number {
    return this.configHeld ? this.configIndex : 0;
  }

  /**
   * This node holds a configuration (in its log or snapshot), and `--peers`
   * names members it does not have (the operator meant another cluster, or
   * "grew" it by editing flags: issue 27, item 1): it does not campaign until
   * they agree (it may be behind: a leader brings it the newer one), and the
   * runtime says how to fix its flags. Flags that only lack members added
   * since are merely out of date (the runtime warns).
   */
  get peersDisagree(): boolean {
    return this.options.checkPeers !== false && this.configHeld && namesNotHeld(this.config, this.bootstrap).length > 0;
  }

  private get isVoter(): boolean {
    return this.voterIds.includes(this.id);
  }

  /** Recomputes the configuration in effect after the log changed (an append, a truncation, a snapshot). */
  private refreshConfiguration(): void {
    let found: { index: number; config: Configuration } | undefined;
    for (let i = this.entries.length - 1; i >= 0 && found === undefined; i--) {
      const e = this.entries[i]!;
      if (isConfigurationCommand(e.command)) found = { index: e.index, config: decodeConfiguration(e.command) };
    }
    const before = this.config;
    if (found !== undefined) [this.config, this.configIndex, this.configHeld] = [found.config, found.index, true];
    else if (this.snapConfig !== undefined) [this.config, this.configIndex, this.configHeld] = [this.snapConfig, this.snap.index, true];
    else [this.config, this.configIndex, this.configHeld] = [this.bootstrap, 0, false];
    this.voterIds = voters(this.config);
    this.others = this.config.members.map((m) => m.name).filter((n) => n !== this.id);
    this.quorum = Math.floor(this.voterIds.length / 2) + 1;
    if (this.role === 'leader' && before !== this.config) {
      for (const p of this.others) if (!this.progress.has(p)) this.progress.set(p, new Progress(this.lastIndex + 1));
      for (const p of [...this.progress.keys()]) if (!this.others.includes(p)) this.progress.delete(p);
      if (this.transferee !== undefined && !this.voterIds.includes(this.transferee)) this.transferee = undefined;
    }
  }

  /** The configuration in effect at `index` (for a snapshot through it). */
  private configurationAt(index: number): Configuration | undefined {
    for (let i = Math.min(index, this.lastIndex) - this.snap.index - 1; i >= 0; i--) {
      const e = this.entries[i]!;
      if (isConfigurationCommand(e.command)) return decodeConfiguration(e.command);
    }
    return this.snapConfig;
  }

  /** What a snapshot through `index` (<= applied) is described by: its index, term and configuration. */
  snapshotMeta(index: number): SnapshotMeta {
    const c = this.configurationAt(index);
    return c === undefined ? { index, term: this.termAt(index)! } : { index, term: this.termAt(index)!, members: encodeConfiguration(c) };
  }

  /**
   * Leader: appends a new configuration (it takes effect at once, on every
   * node as it appends it). Returns its log index, or why not: one change at
   * a time (the previous one must have committed), only once this leader has
   * committed an entry of its own term (thesis 4.1, the fix of its bug),
   * never during a leadership transfer, and never more than one voter
   * added or removed (the old and new majorities must overlap).
   */
  proposeConfiguration(next: Configuration): number | string {
    if (this.role !== 'leader') return 'this node is not the leader';
    checkConfiguration(next);
    if (this.transferee !== undefined) return 'a leadership transfer is under way';
    if (this.configHeld && this.configIndex > this.commit) return `the membership change at index ${this.configIndex} has not committed yet`;
    if (this.commit < this.termStart) return 'this leader has not committed an entry of its term yet';
    const before = new Set(this.voterIds);
    const after = new Set(voters(next));
    const changed = [...before].filter((v) => !after.has(v)).length + [...after].filter((v) => !before.has(v)).length;
    if (changed > 1) return 'a change may add or remove one voter at a time';
    if (!after.has(this.id)) return 'the leader cannot remove itself: transfer leadership first';
    return this.propose([encodeConfiguration(next)])!;
  }

  // --- leadership transfer ---

  /**
   * Leader: hands leadership to `to` (default: the voter whose log matches
   * furthest) once its log has everything this node's has, with TimeoutNow
   * (it campaigns at once). Returns the voter chosen, or undefined when there
   * is none. It is given up after an election timeout (the target is gone).
   */
  transferLeadership(to?: string): string | undefined {
    if (this.role !== 'leader') return undefined;
    const candidates = this.voterIds.filter((v) => v !== this.id);
    const target = to ?? candidates.reduce<string | undefined>((best, v) => (best === undefined || this.progress.get(v)!.match > this.progress.get(best)!.match ? v : best), undefined);
    if (target === undefined || !candidates.includes(target)) return undefined;
    this.transferee = target;
    this.transferElapsed = 0;
    this.maybeTimeoutNow();
    return target;
  }

  /** The voter a transfer is handing leadership to (undefined: none under way). */
  get transferTarget(): string | undefined {
    return this.transferee;
  }

  private maybeTimeoutNow(): void {
    const t = this.transferee;
    if (t === undefined) return;
    if (this.progress.get(t)!.match >= this.lastIndex) this.sendNow({ type: 'timeout-now', from: this.id, to: t, term: this.term });
    else this.sendAppend(t);
  }

  // --- the log ---

  get lastIndex(): number {
    return this.snap.index + this.entries.length;
  }

  get lastTerm(): number {
    return this.termAt(this.lastIndex)!;
  }

  get snapshotIndex(): number {
    return this.snap.index;
  }

  /** The last index this node counts as written to its disk (a leader counts it toward commit). */
  get durableIndex(): number {
    return this.stable;
  }

  get appliedIndex(): number {
    return this.applied;
  }

  /** Term, vote, commit and membership as they must be on disk (a new WAL segment starts with them). */
  get hardState(): Required<HardState> {
    return { term: this.term, vote: this.vote, commit: this.commit, membership: this.membership };
  }

  /** A snapshot accepted from the leader that the next Ready carries (undefined: none). */
  get pendingSnapshot(): SnapshotMeta | undefined {
    return this.snapshotToInstall;
  }

  /** Term of the entry at `index`, or undefined when it is compacted away or not there. */
  termAt(index: number): number | undefined {
    if (index === this.snap.index) return this.snap.term;
    if (index < this.snap.index || index > this.lastIndex) return undefined;
    return this.entries[index - this.snap.index - 1]!.term;
  }

  /** Entries in [from, to], both within the log (after the snapshot). */
  slice(from: number, to: number): Entry[] {
    return this.entries.slice(from - this.snap.index - 1, to - this.snap.index);
  }

  private append(entry: Entry): void {
    this.entries.push(entry);
  }

  private truncate(from: number): void {
    if (from <= this.commit) throw new SafetyViolation(`${this.id}: asked to truncate committed entry ${from} (commit ${this.commit})`);
    this.entries.length = from - this.snap.index - 1;
    this.truncatedFrom = Math.min(this.truncatedFrom ?? from, from);
    this.unstableFrom = Math.min(this.unstableFrom, from);
    if (this.stable >= from) this.stable = from - 1;
    // A configuration that was appended and is now cut goes with it (thesis 4.1: back to the one before).
    if (this.configHeld && this.configIndex >= from) this.refreshConfiguration();
  }

  // --- driving ---

  tick(): void {
    this.electionElapsed++;
    if (this.role === 'leader') {
      if (this.transferee !== undefined && ++this.transferElapsed >= this.options.electionTicks) this.transferee = undefined;
      if (this.electionElapsed >= this.options.electionTicks) {
        this.electionElapsed = 0;
        this.checkQuorum();
        if (this.role !== 'leader') return;
      }
      if (++this.heartbeatElapsed >= this.options.heartbeatTicks) {
        this.heartbeatElapsed = 0;
        this.broadcastHeartbeat();
      }
      return;
    }
    if (this.electionElapsed >= this.timeout) {
      this.electionElapsed = 0;
      this.campaign();
    }
  }

  /** Appends commands (leader only). Returns the index of the last one, or undefined when not leader. */
  propose(commands: readonly string[]): number | undefined {
    if (this.role !== 'leader') return undefined;
    for (const command of commands) this.append({ index: this.lastIndex + 1, term: this.term, command });
    if (commands.some(isConfigurationCommand)) this.refreshConfiguration();
    for (const p of this.others) this.sendAppend(p);
    this.maybeCommit();
    return this.lastIndex;
  }

  step(m: Message): void {
    if (m.to !== this.id || m.from === this.id) return;
    this.noteExistingCluster(m);
    // Whether a voter holds nothing is what founding needs, whatever term its answer carries (a
    // refusal carries the voter's own, older, term: see handleVoteResponse).
    if (m.type === 'vote-resp' && m.pre && m.empty && this.role === 'pre-candidate' && this.voterIds.includes(m.from)) {
      this.emptyVoters.add(m.from);
      if (m.term < this.term) return this.tally(true);
    }
    if (m.term > this.term) {
      if (m.type === 'vote') {
        // CheckQuorum lease: while we hear from a leader, nobody can win an election; ignore. Unless
        // that leader handed over (TimeoutNow): then its own successor asks.
        if (this.leader !== undefined && this.electionElapsed < this.options.electionTicks && !m.transfer) return;
        if (m.pre) return this.handleVote(m); // a PreVote never changes our term
      }
      if (m.type === 'vote-resp' && m.pre && m.granted) {
        // granted PreVotes carry the term the candidate will use: not a newer term of ours.
      } else {
        this.becomeFollower(m.term, m.type === 'append' || m.type === 'heartbeat' || m.type === 'snapshot' ? m.from : undefined);
      }
    } else if (m.term < this.term) {
      // Tell a stale leader or candidate that a newer term exists.
      if (m.type === 'append' || m.type === 'heartbeat' || m.type === 'snapshot') {
        this.send({ type: 'append-resp', from: this.id, to: m.from, term: this.term, success: false, match: 0, hint: 0, rejected: 0 });
      } else if (m.type === 'vote' && m.pre) {
        this.send({ type: 'vote-resp', from: this.id, to: m.from, term: this.term, granted: false, pre: true, empty: this.empty && (m.founders === '' || m.founders === this.foundersKey) });
      }
      return;
    }
    switch (m.type) {
      case 'vote':
        return this.handleVote(m);
      case 'vote-resp':
        return this.handleVoteResponse(m);
      case 'append':
        this.followLeader(m.from, m.commit);
        this.handleAppend(m);
        return this.checkCaughtUp();
      case 'heartbeat':
        this.followLeader(m.from, m.commit);
        // Only through an entry we hold with the leader's term: a log we lost and refilled
        // differently (a replaced node) must not be committed on a stale match index.
        if (m.commit > this.commit && m.commit <= this.lastIndex && this.termAt(m.commit) === m.commitTerm) this.takeCommit(m.commit);
        this.checkCaughtUp();
        return this.send({ type: 'heartbeat-resp', from: this.id, to: m.from, term: this.term, lastIndex: this.lastIndex, read: m.read });
      case 'snapshot':
        this.followLeader(m.from, m.snapshot.index);
        this.handleSnapshot(m.from, m.snapshot);
        return this.checkCaughtUp();
      case 'append-resp':
        return this.handleAppendResponse(m);
      case 'heartbeat-resp':
        if (this.role === 'leader' && m.read > (this.readAcks.get(m.from) ?? 0)) this.readAcks.set(m.from, m.read);
        return this.handleHeartbeatResponse(m.from, m.lastIndex);
      case 'timeout-now':
        // The leader hands over to us (its log and ours match): campaign now, without a PreVote.
        if (this.role === 'follower' && this.mayCampaign) this.becomeCandidate(true);
        return;
    }
  }

  // --- Ready / advance ---

  /**
   * Takes the messages that may leave before anything is persisted (the
   * leader's appends and heartbeats), so the runtime can send them at once
   * instead of at its next Ready.
   */
  takeImmediate(): Message[] {
    const out = this.outNow;
    this.outNow = [];
    return out;
  }

  hasReady(): boolean {
    return (
      this.hardDirty ||
      this.unstableFrom <= this.lastIndex ||
      this.truncatedFrom !== undefined ||
      this.snapshotToInstall !== undefined ||
      this.outNow.length > 0 ||
      this.outAfter.length > 0 ||
      this.applied < this.commit
    );
  }

  ready(): Ready {
    // With a snapshot to install, the entries after it are written with it (its new WAL segment).
    const from = this.snapshotToInstall !== undefined ? this.snap.index + 1 : Math.max(this.unstableFrom, this.snap.index + 1);
    const applyFrom = Math.max(this.applied + 1, this.snap.index + 1);
    const rd: Ready = {
      hardState: this.hardDirty || (this.commitDirty && from <= this.lastIndex) ? this.hardState : undefined,
      truncateFrom: this.truncatedFrom,
      entries: from <= this.lastIndex ? this.slice(from, this.lastIndex) : [],
      snapshot: this.snapshotToInstall,
      sendNow: this.outNow,
      sendAfterPersist: this.outAfter,
      committed: applyFrom <= this.commit ? this.slice(applyFrom, this.commit) : [],
    };
    this.outNow = [];
    this.outAfter = [];
    if (rd.hardState !== undefined) this.commitDirty = false;
    this.hardDirty = false;
    this.truncatedFrom = undefined;
    this.snapshotToInstall = undefined;
    this.unstableFrom = this.lastIndex + 1;
    return rd;
  }

  /** The runtime has persisted `rd` and applied its committed entries. */
  advance(rd: Ready): void {
    const last = rd.entries.at(-1);
    if (last !== undefined && this.termAt(last.index) === last.term && last.index > this.stable) this.stable = last.index;
    if (rd.snapshot !== undefined && rd.snapshot.index > this.stable) this.stable = rd.snapshot.index;
    const lastApplied = rd.committed.at(-1);
    if (lastApplied !== undefined) this.applied = Math.max(this.applied, lastApplied.index);
    if (rd.snapshot !== undefined) this.applied = Math.max(this.applied, rd.snapshot.index);
    if (this.role === 'leader') this.maybeCommit();
  }

  /** The runtime holds a durable snapshot through `index` (<= applied): forget the log up to it. */
  compact(index: number): void {
    if (index <= this.snap.index) return;
    if (index > this.applied) throw new Error(`cannot compact beyond applied (${index} > ${this.applied})`);
    const meta = this.snapshotMeta(index);
    this.snapConfig = meta.members === undefined ? undefined : decodeConfiguration(meta.members);
    this.entries = this.entries.slice(index - this.snap.index);
    this.snap = meta;
  }

  // --- elections ---

  private resetTimeout(): void {
    const e = this.options.electionTicks;
    this.timeout = e + Math.floor(this.options.random() * e);
  }

  private becomeFollower(term: number, leader: string | undefined): void {
    if (term > this.term) {
      this.term = term;
      this.vote = undefined;
      this.hardDirty = true;
    }
    this.role = 'follower';
    this.leader = leader;
    this.electionElapsed = 0;
    this.votes.clear();
    this.progress.clear();
    this.transferee = undefined;
    this.resetTimeout();
  }

  /**
   * A leader of our term (or a newer one, adopted above) spoke. A joining
   * node takes the leader's commit index at first contact as what it must
   * reach before it votes or campaigns: until then its empty log may have
   * forgotten votes it cast before its disk was replaced.
   */
  private followLeader(leader: string, leaderCommit: number): void {
    if (!this.mayVote && this.joinTarget === undefined) this.joinTarget = leaderCommit;
    if (this.role !== 'follower' || this.leader !== leader) this.becomeFollower(this.term, leader);
    this.electionElapsed = 0;
  }

  /**
   * A node that started with nothing on disk and without --raft-join hears
   * from a leader that the cluster has committed entries: it is a replaced
   * member whatever its flags say (a new node catches up the same way). It
   * joins: no vote, no campaign, until it has caught up. Until such a leader
   * speaks it votes, as a new cluster's nodes must to elect their first
   * leader; a replaced member must therefore start with --raft-join, which
   * closes that window (docs/raft.md).
   */
  private noteExistingCluster(m: Message): void {
    if (this.membership !== 'unknown') return;
    // Only a leader that has committed something (or sends a snapshot) proves an existing cluster:
    // a vote request's log may be a new cluster's uncommitted first entry.
    const evidence = ((m.type === 'append' || m.type === 'heartbeat') && m.commit > 0) || m.type === 'snapshot';
    if (evidence) {
      this.setMembership('joining');
      this.joinedAutomatically = true;
    }
  }

  private setMembership(m: Membership): void {
    if (this.membership === m) return;
    this.membership = m;
    this.hardDirty = true;
  }

  /** Joining nodes neither vote nor campaign. */
  private get mayVote(): boolean {
    return this.membership !== 'joining';
  }

  /** True once this node found it was a replaced member started without --raft-join (the runtime logs it). */
  joinedAutomatically = false;

  /** A joining node votes (and campaigns) again once its log holds what was committed when it joined. */
  private checkCaughtUp(): void {
    if (this.membership === 'joining' && this.joinTarget !== undefined && this.commit >= this.joinTarget) {
      this.setMembership('member');
      this.joinTarget = undefined;
    }
  }

  /**
   * Whether this node may stand for election: it votes (its disk holds its
   * votes: not joining), it is a voter of the configuration it holds, and
   * that configuration agrees with --peers (see peersDisagree).
   */
  private get mayCampaign(): boolean {
    return this.mayVote && this.isVoter && !this.peersDisagree;
  }

  /**
   * A node that has nothing (no log, no configuration of its own) and has
   * never seen a cluster: it may only found a new one, with every node
   * --peers names just as empty (see handleVoteResponse).
   */
  private get founding(): boolean {
    return this.empty && this.membership === 'unknown';
  }

  /** No log and no membership of its own. */
  private get empty(): boolean {
    return !this.configHeld && this.lastIndex === 0;
  }

  /** What an empty node's vote requests say it would found: its --peers names ('' once it holds something). */
  private get foundersKey(): string {
    return this.empty ? this.bootstrap.members.map((m) => m.name).sort().join(',') : '';
  }

  /**
   * Empty voters whose vote requests named another set of founders than
   * ours: nodes started with other --peers lists, which must not found a
   * cluster together (the runtime says so in its log).
   */
  readonly foundersDisagree = new Set<string>();

  private otherVoters(): string[] {
    return this.voterIds.filter((v) => v !== this.id);
  }

  private campaign(): void {
    // A joining node has not caught up: it may have forgotten its term and votes, so it waits; a
    // learner, or a node whose flags disagree with the membership it holds, does not stand either.
    if (!this.mayCampaign) return this.resetTimeout();
    this.role = 'pre-candidate';
    this.leader = undefined;
    this.votes.clear();
    this.emptyVoters.clear();
    this.votes.set(this.id, true);
    this.resetTimeout();
    if (this.otherVoters().length === 0) return this.becomeCandidate();
    for (const p of this.otherVoters()) {
      this.send({ type: 'vote', from: this.id, to: p, term: this.term + 1, lastIndex: this.lastIndex, lastTerm: this.lastTerm, pre: true, transfer: false, founders: this.foundersKey });
    }
  }

  /** `transfer`: the leader handed over (TimeoutNow); voters that still hear from it vote all the same. */
  private becomeCandidate(transfer = false): void {
    this.term++;
    this.vote = this.id;
    this.hardDirty = true;
    this.role = 'candidate';
    this.leader = undefined;
    this.votes.clear();
    this.votes.set(this.id, true);
    this.electionElapsed = 0;
    this.resetTimeout();
    if (this.otherVoters().length === 0) return this.becomeLeader();
    for (const p of this.otherVoters()) {
      this.send({ type: 'vote', from: this.id, to: p, term: this.term, lastIndex: this.lastIndex, lastTerm: this.lastTerm, pre: false, transfer, founders: this.foundersKey });
    }
  }

  private becomeLeader(): void {
    this.role = 'leader';
    this.leader = this.id;
    this.readRound = 0;
    this.readAcks.clear();
    this.setMembership('member'); // a majority elected it on this disk's log
    this.heartbeatElapsed = 0;
    this.electionElapsed = 0;
    this.progress.clear();
    this.transferee = undefined;
    for (const p of this.others) this.progress.set(p, new Progress(this.lastIndex + 1));
    this.termStart = this.lastIndex + 1;
    // A no-op of the new term: committing it commits everything before it (paper, section 8). A
    // cluster whose log holds no configuration yet (a new one, or one older than membership
    // changes) gets the one --peers describes, so every node holds it from now on.
    this.propose(this.configHeld ? [''] : ['', encodeConfiguration(this.config)]);
  }

  private logUpToDate(lastIndex: number, lastTerm: number): boolean {
    return lastTerm > this.lastTerm || (lastTerm === this.lastTerm && lastIndex >= this.lastIndex);
  }

  private handleVote(m: Extract<Message, { type: 'vote' }>): void {
    // Two empty nodes with different --peers lists are not one new cluster: refuse, and do not count
    // as empty for it (a node in both lists would otherwise let each found its own).
    const otherFounders = this.empty && m.founders !== '' && m.founders !== this.foundersKey;
    if (otherFounders) this.foundersDisagree.add(m.from);
    // Votes go only to a voter of the configuration this node holds (a node outside it, an old
    // member or a stranger started with other flags, wins nothing here). A learner votes too when
    // asked: the candidate's newer configuration may make it a voter (an uncommitted promotion the
    // learner has not received), and only the candidate's configuration decides whose votes count;
    // a learner that refused could leave such a candidate no majority, ever (simulator seed 24).
    const canVote =
      !otherFounders && this.mayVote && this.voterIds.includes(m.from) && (m.pre ? m.term > this.term : this.vote === undefined || this.vote === m.from);
    const granted = canVote && this.logUpToDate(m.lastIndex, m.lastTerm);
    if (granted && !m.pre) {
      this.vote = m.from;
      this.hardDirty = true;
      this.electionElapsed = 0;
    }
    this.send({ type: 'vote-resp', from: this.id, to: m.from, term: granted && m.pre ? m.term : this.term, granted, pre: m.pre, empty: this.empty && !otherFounders });
  }

  private handleVoteResponse(m: Extract<Message, { type: 'vote-resp' }>): void {
    const round = m.pre ? 'pre-candidate' : 'candidate';
    if (this.role !== round || !this.voterIds.includes(m.from)) return;
    this.votes.set(m.from, m.granted);
    this.tally(m.pre);
  }

  private tally(pre: boolean): void {
    let yes = 0;
    let no = 0;
    for (const v of this.votes.values()) {
      if (v) yes++;
      else no++;
    }
    // Founding a new cluster takes every node --peers names answering that it holds nothing either
    // (a replaced one that may not vote yet included), and a majority granting. Without that, a few
    // empty nodes with a longer --peers list could found a second cluster beside a running one
    // (issue 27, item 1: two leaders, both granting the same key).
    const allEmpty = this.otherVoters().every((v) => this.emptyVoters.has(v));
    if (yes >= this.quorum && (!pre || !this.founding || allEmpty)) {
      if (pre) this.becomeCandidate();
      else this.becomeLeader();
    } else if (no >= this.quorum) {
      this.becomeFollower(this.term, undefined);
    }
  }

  private checkQuorum(): void {
    let active = 1; // this node
    for (const [id, pr] of this.progress) {
      if (pr.active && this.voterIds.includes(id)) active++;
      pr.active = false;
    }
    if (active < this.quorum) this.becomeFollower(this.term, undefined);
  }

  // --- replication: follower side ---

  private handleAppend(m: Extract<Message, { type: 'append' }>): void {
    let prevIndex = m.prevIndex;
    let prevTerm = m.prevTerm;
    let entries = m.entries;
    if (prevIndex < this.snap.index) {
      // The start is inside our snapshot, which is committed and so matches the leader.
      entries = entries.filter((e) => e.index > this.snap.index);
      prevIndex = this.snap.index;
      prevTerm = this.snap.term;
      if (entries.length > 0 && entries[0]!.index !== prevIndex + 1) {
        return this.send({ type: 'append-resp', from: this.id, to: m.from, term: this.term, success: false, match: 0, hint: this.lastIndex + 1, rejected: m.prevIndex });
      }
    }
    if (this.termAt(prevIndex) !== prevTerm) {
      return this.send({ type: 'append-resp', from: this.id, to: m.from, term: this.term, success: false, match: 0, hint: this.conflictHint(prevIndex), rejected: prevIndex });
    }
    for (const e of entries) {
      const have = this.termAt(e.index);
      if (have === e.term) continue;
      // A leader never contradicts a committed entry (leader completeness): the message is the
      // peer's fault, refused with its link. Our own truncate() asserts it too, as our bug.
      if (have !== undefined && e.index <= this.commit) throw new PeerProtocolError(`${m.from} sent entry ${e.index} of term ${e.term}, which contradicts the committed entry of term ${have}`);
      if (have !== undefined) this.truncate(e.index);
      this.append(e);
      this.unstableFrom = Math.min(this.unstableFrom, e.index);
      if (isConfigurationCommand(e.command)) this.refreshConfiguration();
    }
    // Entries taken from a leader that has committed nothing (an append showing a commit would have
    // made us join first): a new cluster, and we are one of its founders. Keep voting when a later
    // leader shows committed state, or founders that learn of the first commit late, beside a
    // replaced node, could elect no one (seed 610610).
    if (this.membership === 'unknown' && entries.length > 0) this.setMembership('member');
    const lastNew = prevIndex + entries.length;
    if (m.commit > this.commit) this.takeCommit(Math.min(m.commit, lastNew));
    this.send({ type: 'append-resp', from: this.id, to: m.from, term: this.term, success: true, match: lastNew, hint: 0, rejected: 0 });
  }

  /** Where the leader should try next: skip the whole conflicting term at once. */
  private conflictHint(prevIndex: number): number {
    if (prevIndex > this.lastIndex) return this.lastIndex + 1;
    const conflictTerm = this.termAt(prevIndex);
    let i = prevIndex;
    while (i - 1 > Math.max(this.commit, this.snap.index) && this.termAt(i - 1) === conflictTerm) i--;
    return i;
  }

  private handleSnapshot(from: string, s: SnapshotMeta): void {
    if (s.index <= this.commit) {
      return this.send({ type: 'append-resp', from: this.id, to: from, term: this.term, success: true, match: this.commit, hint: 0, rejected: 0 });
    }
    if (this.termAt(s.index) === s.term) {
      // We have the entries: keep the suffix; the snapshot just moves the commit. The Ready carries
      // the suffix with the snapshot (its new segment holds them): no second write of what is on
      // disk already (issue 27, D-1).
      this.entries = this.entries.slice(s.index - this.snap.index);
    } else {
      this.entries = [];
      this.truncatedFrom = Math.min(this.truncatedFrom ?? s.index + 1, this.snap.index + 1);
      // The discarded entries are no longer ours, durable or not: only the old snapshot is, until
      // the new one is persisted (advance). A leader counting `stable` must not count them.
      if (this.stable > this.snap.index) this.stable = this.snap.index;
    }
    this.snap = s;
    this.snapConfig = s.members === undefined ? undefined : decodeConfiguration(s.members);
    this.refreshConfiguration();
    this.commit = s.index;
    this.hardDirty = true;
    this.snapshotToInstall = s;
    this.send({ type: 'append-resp', from: this.id, to: from, term: this.term, success: true, match: s.index, hint: 0, rejected: 0 });
  }

  /** A follower takes a leader's commit index (now, unless the commitLate fault point says later). */
  private takeCommit(index: number): void {
    if (this.options.commitLate?.() !== true) this.setCommit(index);
  }

  private setCommit(index: number): void {
    if (index > this.commit) {
      this.commit = index;
      this.commitDirty = true;
    }
  }

  // --- replication: leader side ---

  private sendAppend(to: string): void {
    const pr = this.progress.get(to)!;
    if (pr.inflight >= (pr.probing ? 1 : this.maxInflight)) return;
    if (pr.next <= this.snap.index || (pr.probing && !pr.snapshotSent && this.snap.index > 0 && this.options.snapshotForProbe?.() === true)) {
      if (pr.snapshotSent) return;
      pr.snapshotSent = true;
      pr.inflight++;
      return this.sendNow({ type: 'snapshot', from: this.id, to, term: this.term, snapshot: this.snap });
    }
    const prevIndex = pr.next - 1;
    const last = Math.min(this.lastIndex, prevIndex + this.maxEntries);
    const entries = last > prevIndex ? this.slice(pr.next, last) : [];
    if (entries.length === 0 && !pr.probing) return;
    pr.inflight++;
    if (!pr.probing && entries.length > 0) pr.next = last + 1;
    this.sendNow({ type: 'append', from: this.id, to, term: this.term, prevIndex, prevTerm: this.termAt(prevIndex)!, entries, commit: this.commit });
  }

  private handleAppendResponse(m: Extract<Message, { type: 'append-resp' }>): void {
    if (this.role !== 'leader') return;
    const pr = this.progress.get(m.from);
    if (pr === undefined) return;
    pr.active = true;
    pr.inflight = Math.max(0, pr.inflight - 1);
    if (m.success) {
      pr.responded = true;
      if (m.match > pr.match) pr.match = m.match;
      if (pr.next <= pr.match) pr.next = pr.match + 1;
      pr.probing = false;
      pr.snapshotSent = false;
      this.maybeCommit();
      if (m.from === this.transferee && pr.match >= this.lastIndex) this.sendNow({ type: 'timeout-now', from: this.id, to: m.from, term: this.term });
    } else {
      // Only the refusal of our latest probe counts; others answer appends already superseded.
      if (m.rejected !== pr.next - 1) return;
      pr.probing = true;
      pr.inflight = 0;
      pr.snapshotSent = false;
      // Below what it had confirmed: the follower lost its log (a replaced node). Start from what it has.
      if (m.hint <= pr.match) pr.match = m.hint - 1;
      pr.next = Math.max(pr.match + 1, Math.min(m.hint, pr.next - 1));
    }
    if (pr.next <= this.lastIndex || pr.probing) this.sendAppend(m.from);
  }

  private handleHeartbeatResponse(from: string, followerLast: number): void {
    if (this.role !== 'leader') return;
    const pr = this.progress.get(from);
    if (pr === undefined) return;
    pr.active = true;
    if (followerLast < pr.match) {
      // It has less than it once confirmed: it lost its log (a node replaced with an empty data directory).
      pr.match = followerLast;
      pr.next = followerLast + 1;
      pr.probing = true;
      pr.inflight = 0;
      pr.snapshotSent = false;
    }
    if (pr.match < this.lastIndex) this.sendAppend(from);
  }

  private broadcastHeartbeat(): void {
    for (const p of this.others) {
      const pr = this.progress.get(p)!;
      if (pr.match < this.lastIndex && !pr.responded) {
        // A lagging follower answered no append (or snapshot) for a whole heartbeat: assume what
        // we sent was lost and ask again. Appends sent ahead on its last answer go back to just
        // after its match; a probe is sent again where it was (a new leader knows no match yet:
        // going back to 1 would resend the whole log, or a snapshot).
        if (!pr.probing) pr.next = pr.match + 1;
        pr.probing = true;
        pr.inflight = 0;
        pr.snapshotSent = false;
      }
      pr.responded = false;
      this.sendHeartbeat(p);
      if (pr.match < this.lastIndex) this.sendAppend(p);
    }
  }

  private sendHeartbeat(to: string): void {
    const commit = Math.min(this.progress.get(to)!.match, this.commit);
    this.sendNow({ type: 'heartbeat', from: this.id, to, term: this.term, commit, commitTerm: this.termAt(commit) ?? 0, read: this.readRound });
  }

  /**
   * Leader: starts a leadership check (ReadIndex, Raft thesis 6.4): a
   * heartbeat to every follower now, numbered. Once a majority has answered
   * it (`confirmedRead` reaches the number returned), this node was still the
   * leader when the check began, so an answer decided before that from its
   * table (committed through the index it depends on) is not stale: no log
   * entry is needed for a reply that changed nothing (issue 27, D-12).
   */
  confirmRead(): number {
    if (this.role !== 'leader') return this.readRound;
    this.readRound++;
    for (const p of this.others) this.sendHeartbeat(p);
    return this.readRound;
  }

  /** The next leadership check's number (what reads registered before it starts wait for). */
  get nextReadRound(): number {
    return this.readRound + 1;
  }

  /**
   * The latest leadership check a majority of voters answered (leader; 0
   * otherwise): the highest round at least `quorum` voters, this node
   * included, have acknowledged. A learner's acknowledgement counts for
   * nothing, as its copy of the log does not (a leader cut off from the
   * other voters but not from a learner must not answer from its table).
   * No array per call: it runs on every message a leader takes.
   */
  get confirmedRead(): number {
    if (this.role !== 'leader') return 0;
    let best = 0;
    for (const v of this.voterIds) {
      const round = v === this.id ? this.readRound : (this.readAcks.get(v) ?? 0);
      if (round <= best) continue;
      let atLeast = 0;
      for (const w of this.voterIds) if ((w === this.id ? this.readRound : (this.readAcks.get(w) ?? 0)) >= round) atLeast++;
      if (atLeast >= this.quorum) best = round;
    }
    return best;
  }

  private maybeCommit(): void {
    if (this.role !== 'leader') return;
    // Voters only: a learner's copy does not count toward a majority.
    const matches = this.voterIds.map((v) => (v === this.id ? this.stable : (this.progress.get(v)?.match ?? 0))).sort((a, b) => b - a);
    const n = matches[this.quorum - 1]!;
    // Only entries of the leader's own term are committed by counting replicas (paper, figure 8).
    if (n > this.commit && this.termAt(n) === this.term) this.setCommit(n);
  }

  /** A leader's appends and heartbeats need nothing of ours on disk: they may leave at once. */
  private sendNow(m: Message): void {
    this.outNow.push(m);
  }

  /** Votes and acknowledgements speak for our term, vote and log: only once those are durable. */
  private send(m: Message): void {
    this.outAfter.push(m);
  }

  /** Progress of each follower (leader only), for status and lag. */
  followers(): Array<{ id: string; match: number; next: number; voter: boolean }> {
    return [...this.progress].map(([id, p]) => ({ id, match: p.match, next: p.next, voter: this.voterIds.includes(id) }));
  }
}
