/**
 * A seeded, deterministic simulation of a Raft cluster: RaftCore objects
 * over a simulated network (drop, delay, reorder, duplicate, partition),
 * simulated disks (a crash loses what was not yet persisted) and clocks
 * (nodes tick at different rates, pause, crash and restart). Each node
 * applies committed commands to the real lock table. Safety is checked after
 * every step; a failing seed replays exactly.
 */
import { RaftCore, type RaftRecovered } from '../../src/raft/raft-core.js';
import type { Entry, HardState, Message, Ready, SnapshotMeta } from '../../src/raft/types.js';
import { LockTable, plainRecord, type LockTableSnapshot } from '../../src/state-machine/lock-table.js';
import { decodeCommand, encodeCommand } from '../../src/state-machine/command-codec.js';
import { seededRandom } from '@ticketing/checker';

export interface SimOptions {
  readonly nodes: number;
  readonly seed: number;
  readonly steps: number;
  readonly dropRate: number;
  readonly duplicateRate: number;
  readonly maxDelay: number;
  /** Chance per step of a fault event (partition, heal, crash, restart, pause). */
  readonly faultRate: number;
  readonly snapshotEvery: number;
}

interface Disk {
  hard: HardState;
  snapshot: SnapshotMeta;
  snapshotData: LockTableSnapshot;
  entries: Entry[];
}

interface InFlight {
  message: Message;
  deliverAt: number;
  /** InstallSnapshot travels with the leader's snapshot data. */
  data?: LockTableSnapshot;
}

class SimNode {
  core!: RaftCore;
  table!: LockTable;
  alive = true;
  pausedUntil = 0;
  /** Ticks advance by `rate` per step on average: clock skew between nodes. */
  rate: number;
  private phase = 0;
  pendingReady: { rd: Ready; doneAt: number } | undefined;
  /** Snapshot data received with InstallSnapshot messages, by index, until a Ready accepts one. */
  readonly receivedSnapshots = new Map<number, LockTableSnapshot>();
  readonly disk: Disk = {
    hard: { term: 0, vote: undefined, commit: 0 },
    snapshot: { index: 0, term: 0 },
    snapshotData: new LockTable(1n, plainRecord).snapshot(),
    entries: [],
  };

  constructor(
    readonly id: string,
    readonly sim: Simulation,
  ) {
    this.rate = 0.8 + sim.random() * 0.4;
    this.boot();
  }

  boot(): void {
    const recovered: RaftRecovered = { hardState: this.disk.hard, snapshot: this.disk.snapshot, entries: this.disk.entries };
    this.core = new RaftCore(
      { id: this.id, peers: this.sim.ids, electionTicks: 10, heartbeatTicks: 2, random: this.sim.random, maxEntriesPerAppend: 16, maxInflightAppends: 8 },
      recovered,
    );
    this.table = LockTable.restore(this.disk.snapshotData, plainRecord);
    this.pendingReady = undefined;
    this.receivedSnapshots.clear();
  }

  ticksDue(): number {
    this.phase += this.rate;
    const n = Math.floor(this.phase);
    this.phase -= n;
    return n;
  }

  /** Snapshots this node took, by index: a message names the snapshot it carries. */
  readonly snapshots = new Map<number, LockTableSnapshot>();

  snapshotAt(index: number): LockTableSnapshot {
    if (index === this.disk.snapshot.index) return this.disk.snapshotData;
    const s = this.snapshots.get(index);
    if (s === undefined) throw new Error(`${this.id} has no snapshot at ${index}`);
    return s;
  }

  /** Makes `rd` durable: what a crash before this moment loses. */
  persist(rd: Ready): void {
    const d = this.disk;
    if (rd.truncateFrom !== undefined) d.entries = d.entries.filter((e) => e.index < rd.truncateFrom!);
    if (rd.snapshot !== undefined) {
      d.snapshot = rd.snapshot;
      d.snapshotData = this.receivedSnapshots.get(rd.snapshot.index)!;
      d.entries = d.entries.filter((e) => e.index > rd.snapshot!.index);
    }
    for (const e of rd.entries) {
      d.entries = d.entries.filter((x) => x.index < e.index);
      d.entries.push(e);
    }
    if (rd.hardState !== undefined) d.hard = rd.hardState;
  }
}

export class SafetyError extends Error {}

export class Simulation {
  readonly random: () => number;
  readonly ids: string[];
  readonly nodes: SimNode[];
  private network: InFlight[] = [];
  private readonly blocked = new Set<string>();
  now = 0;
  private readonly leaders = new Map<number, string>();
  /** index -> the committed entry, as first seen committed anywhere. */
  private readonly committed = new Map<number, Entry>();
  /** index -> the term of the node that first applied it: leaders of later terms must have it. */
  private readonly committedBy = new Map<number, number>();
  /** index -> the result of applying it, as first computed anywhere. */
  private readonly results = new Map<number, string>();
  private lastGrantToken = 0n;
  private proposalSeq = 0;
  readonly log: string[] = [];

  constructor(readonly options: SimOptions) {
    this.random = seededRandom(options.seed);
    this.ids = Array.from({ length: options.nodes }, (_, i) => `n${i}`);
    this.nodes = this.ids.map((id) => new SimNode(id, this));
  }

  private int(n: number): number {
    return Math.floor(this.random() * n);
  }

  private blockedLink(from: string, to: string): boolean {
    return this.blocked.has(`${from}>${to}`);
  }

  private send(m: Message, data?: LockTableSnapshot): void {
    if (this.blockedLink(m.from, m.to) || this.random() < this.options.dropRate) return;
    const copies = this.random() < this.options.duplicateRate ? 2 : 1;
    for (let i = 0; i < copies; i++) {
      this.network.push({ message: m, deliverAt: this.now + 1 + this.int(this.options.maxDelay + 1), ...(data === undefined ? {} : { data }) });
    }
  }

  private node(id: string): SimNode {
    return this.nodes.find((n) => n.id === id)!;
  }

  /** One step: faults, deliveries, ticks, disk completions, proposals; then the safety checks. */
  step(faults: boolean): void {
    this.now++;
    if (faults && this.random() < this.options.faultRate) this.fault();

    // Deliver due messages in a shuffled order (reordering).
    const due = this.network.filter((f) => f.deliverAt <= this.now);
    this.network = this.network.filter((f) => f.deliverAt > this.now);
    for (let i = due.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      [due[i], due[j]] = [due[j]!, due[i]!];
    }
    for (const f of due) {
      const n = this.node(f.message.to);
      if (!n.alive || n.pausedUntil > this.now || this.blockedLink(f.message.from, f.message.to)) continue;
      if (f.data !== undefined && f.message.type === 'snapshot') n.receivedSnapshots.set(f.message.snapshot.index, f.data);
      n.core.step(f.message);
    }

    for (const n of this.nodes) {
      if (!n.alive || n.pausedUntil > this.now) continue;
      for (let t = n.ticksDue(); t > 0; t--) n.core.tick();
      this.completeDisk(n);
      this.startReady(n);
      if (n.core.role === 'leader' && this.random() < 0.3) this.propose(n);
      if (this.options.snapshotEvery > 0 && n.core.appliedIndex - n.core.snapshotIndex >= this.options.snapshotEvery && n.pendingReady === undefined) {
        this.snapshot(n);
      }
    }
    this.checkSafety();
  }

  private startReady(n: SimNode): void {
    if (n.pendingReady !== undefined || !n.core.hasReady()) return;
    const rd = n.core.ready();
    for (const m of rd.sendNow) this.send(m, m.type === 'snapshot' ? n.snapshotAt(m.snapshot.index) : undefined);
    n.pendingReady = { rd, doneAt: this.now + this.int(3) };
    this.completeDisk(n);
  }

  private completeDisk(n: SimNode): void {
    const p = n.pendingReady;
    if (p === undefined || p.doneAt > this.now) return;
    n.pendingReady = undefined;
    n.persist(p.rd);
    for (const m of p.rd.sendAfterPersist) this.send(m);
    if (p.rd.snapshot !== undefined) n.table = LockTable.restore(n.disk.snapshotData, plainRecord);
    for (const e of p.rd.committed) this.apply(n, e);
    n.core.advance(p.rd);
  }

  private apply(n: SimNode, e: Entry): void {
    // The committed entry must be the same everywhere (state machine safety).
    const first = this.committed.get(e.index);
    if (first === undefined) {
      this.committed.set(e.index, e);
      this.committedBy.set(e.index, n.core.term);
    }
    else if (first.term !== e.term || first.command !== e.command) {
      throw new SafetyError(`${n.id} applied ${JSON.stringify(e)} at ${e.index}, but ${JSON.stringify(first)} was committed there`);
    }
    if (e.command.startsWith('@members ')) return; // the consensus layer's own
    const result = n.table.apply(decodeCommand(e.command));
    const text = result.type === 'granted' ? `granted ${result.token}` : result.type === 'expired' ? `expired ${result.existed}` : result.type;
    const seen = this.results.get(e.index);
    if (seen === undefined) {
      this.results.set(e.index, text);
      if (result.type === 'granted') {
        // Tokens strictly increase with the log, whichever node applies first.
        if (result.token <= this.lastGrantToken) throw new SafetyError(`token ${result.token} at ${e.index} does not exceed ${this.lastGrantToken}`);
        this.lastGrantToken = result.token;
      }
    } else if (seen !== text) {
      throw new SafetyError(`${n.id} computed "${text}" for entry ${e.index}, another node "${seen}"`);
    }
  }

  private snapshot(n: SimNode): void {
    const index = n.core.appliedIndex;
    n.disk.snapshot = { index, term: n.core.termAt(index)! };
    n.disk.snapshotData = n.table.snapshot();
    n.snapshots.set(index, n.disk.snapshotData);
    n.disk.entries = n.disk.entries.filter((e) => e.index > index);
    n.core.compact(index);
  }

  propose(n: SimNode): void {
    const k = `k${this.int(4)}`;
    const seq = ++this.proposalSeq;
    const choice = this.int(10);
    let command: string;
    if (choice < 5) command = encodeCommand({ type: 'grant', key: k, leaseMs: 1000 + seq });
    else if (choice < 7) command = encodeCommand({ type: 'release', key: k, token: n.table.get(k)?.token ?? BigInt(1 + this.int(50)) });
    else if (choice < 9) command = encodeCommand({ type: 'expire', key: k, token: n.table.get(k)?.token ?? 1n });
    else command = encodeCommand({ type: 'token-floor', atLeast: BigInt(seq * 10) });
    n.core.propose([command]);
  }

  private fault(): void {
    const n = this.nodes[this.int(this.nodes.length)]!;
    const other = this.nodes[this.int(this.nodes.length)]!;
    switch (this.int(7)) {
      case 0: // partition one link both ways
        if (n !== other) {
          this.blocked.add(`${n.id}>${other.id}`);
          this.blocked.add(`${other.id}>${n.id}`);
          this.log.push(`${this.now}: partition ${n.id}|${other.id}`);
        }
        break;
      case 1: // isolate a node
        for (const o of this.ids) if (o !== n.id) this.blocked.add(`${n.id}>${o}`).add(`${o}>${n.id}`);
        this.log.push(`${this.now}: isolate ${n.id}`);
        break;
      case 2:
        this.blocked.clear();
        this.log.push(`${this.now}: heal`);
        break;
      case 3: // crash: what was not persisted is lost
        if (n.alive) {
          n.alive = false;
          this.log.push(`${this.now}: crash ${n.id}`);
        }
        break;
      case 4:
        if (!n.alive) {
          n.alive = true;
          n.boot();
          this.log.push(`${this.now}: restart ${n.id}`);
        }
        break;
      case 5: // a pause (GC, SIGSTOP): no ticks, no messages for a while
        n.pausedUntil = this.now + 5 + this.int(40);
        this.log.push(`${this.now}: pause ${n.id} until ${n.pausedUntil}`);
        break;
      case 6: // a one-way link failure
        if (n !== other) {
          this.blocked.add(`${n.id}>${other.id}`);
          this.log.push(`${this.now}: cut ${n.id}>${other.id}`);
        }
        break;
    }
  }

  private checkSafety(): void {
    for (const n of this.nodes) {
      if (!n.alive) continue;
      const c = n.core;
      // Election safety: at most one leader per term.
      if (c.role === 'leader') {
        const known = this.leaders.get(c.term);
        if (known !== undefined && known !== n.id) throw new SafetyError(`two leaders in term ${c.term}: ${known} and ${n.id}`);
        this.leaders.set(c.term, n.id);
        // Leader completeness: an entry committed in a term is in the log of every leader of a later term.
        for (const [index, e] of this.committed) {
          if (index <= c.snapshotIndex || c.term <= this.committedBy.get(index)!) continue;
          if (c.termAt(index) !== e.term) throw new SafetyError(`leader ${n.id} (term ${c.term}) lacks committed entry ${index}`);
        }
      }
      // Committed entries in each node's own log agree with the committed history.
      for (let i = Math.max(c.snapshotIndex + 1, c.commit - 20); i <= c.commit; i++) {
        const e = this.committed.get(i);
        const t = c.termAt(i);
        if (e !== undefined && t !== undefined && t !== e.term) throw new SafetyError(`${n.id} has term ${t} at committed index ${i}, committed term ${e.term}`);
      }
    }
    if (this.now % 25 === 0) this.checkLogMatching();
  }

  /** Log matching: if two logs agree on the term at an index, they agree on everything before it. */
  private checkLogMatching(): void {
    const live = this.nodes.filter((n) => n.alive);
    for (let a = 0; a < live.length; a++) {
      for (let b = a + 1; b < live.length; b++) {
        const x = live[a]!.core;
        const y = live[b]!.core;
        const lo = Math.max(x.snapshotIndex, y.snapshotIndex) + 1;
        const hi = Math.min(x.lastIndex, y.lastIndex);
        let agreeFrom = -1;
        for (let i = hi; i >= lo; i--) {
          if (x.termAt(i) === y.termAt(i)) {
            agreeFrom = i;
            break;
          }
        }
        for (let i = lo; i <= agreeFrom; i++) {
          const ex = x.slice(i, i)[0]!;
          const ey = y.slice(i, i)[0]!;
          if (ex.term !== ey.term || ex.command !== ey.command) {
            throw new SafetyError(`log matching: ${live[a]!.id} and ${live[b]!.id} agree at ${agreeFrom} but differ at ${i}`);
          }
        }
      }
    }
  }

  /** Heals everything and runs until a fresh command is applied on every node (liveness). */
  heal(maxSteps: number): number {
    this.blocked.clear();
    for (const n of this.nodes) {
      n.pausedUntil = 0;
      if (!n.alive) {
        n.alive = true;
        n.boot();
      }
    }
    const marker = encodeCommand({ type: 'token-floor', atLeast: 1n });
    let proposedAt: number | undefined;
    let markerIndex = 0;
    for (let s = 0; s < maxSteps; s++) {
      this.step(false);
      const leader = this.nodes.find((n) => n.core.role === 'leader');
      if (leader !== undefined && proposedAt === undefined) {
        markerIndex = leader.core.propose([marker]) ?? 0;
        proposedAt = this.now;
      }
      if (proposedAt !== undefined && markerIndex > 0 && this.nodes.every((n) => n.core.appliedIndex >= markerIndex)) return s;
      if (proposedAt !== undefined && leader === undefined) proposedAt = undefined; // leadership changed: propose again
    }
    throw new SafetyError(`no progress within ${maxSteps} steps after healing (liveness)`);
  }
}

export function runSeed(options: SimOptions): { steps: number; committed: number; events: number } {
  const sim = new Simulation(options);
  try {
    for (let s = 0; s < options.steps; s++) sim.step(true);
    const steps = sim.heal(3_000);
    return { steps, committed: sim.nodes[0]!.core.commit, events: sim.log.length };
  } catch (err) {
    throw new Error(`seed ${options.seed} failed at step ${sim.now}: ${(err as Error).message}\nlast events:\n${sim.log.slice(-15).join('\n')}`, { cause: err });
  }
}
