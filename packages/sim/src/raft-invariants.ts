/**
 * Raft's safety properties, checked on the real nodes' in-memory logs after
 * every simulation event (Raft paper, figure 3):
 *
 * - Election safety: at most one leader per term, over the whole run.
 * - Log matching: two logs with an entry of the same index and term hold
 *   the same command there and agree on every entry before it.
 * - State-machine safety: an entry a node holds as committed is the entry
 *   every other node holds as committed at that index (same term, same
 *   command), so every node applies the same commands in the same order.
 * - Leader completeness: a leader's log holds every entry of an earlier term
 *   committed before it was elected (across crashes, power losses and
 *   restarts: what a majority made durable must survive).
 * - Durable means durable: every entry a node counts as written (what it has
 *   acknowledged, and as leader counts toward commit) is on its disk.
 */
import type { RaftLogView } from '@ticketing/server';

/** What a node's disk holds durably: does it have index i with term t, and up to where is that sure? */
export interface DurableLog {
  readonly has: (index: number, term: number) => boolean;
  /** Its snapshot's last index: everything up to it is held. */
  readonly through: number;
}

export class SafetyViolation extends Error {
  constructor(
    readonly property: string,
    message: string,
  ) {
    super(`${property}: ${message}`);
  }
}

interface Committed {
  readonly term: number;
  /**
   * The term it was known committed in (the reporting node's term when it
   * first said so): at least the term of the leader that committed it, which
   * is later than the entry's own term when a newer leader committed it.
   */
  readonly inTerm: number;
  readonly command: string;
  /** The node that first reported it committed. */
  readonly by: string;
}

export class RaftInvariants {
  private readonly leaders = new Map<number, string>();
  private readonly committed = new Map<number, Committed>();
  /** Highest index known committed anywhere. */
  private maxCommitted = 0;
  /** Per node, the commit index already compared with the canonical log. */
  private readonly checkedThrough = new Map<string, number>();
  /** Committed membership entries: from each index on, how many voters the cluster had. */
  private readonly voterCounts: Array<{ readonly index: number; readonly voters: number }> = [];
  /** Every membership a node was seen holding (committed or not): its log index -> fewest voters seen there. */
  private readonly held = new Map<number, number>();

  constructor(private readonly onLeader: (name: string, term: number, view: RaftLogView) => void = () => {}) {}

  /** Checks every live node's log against the properties and against the others. */
  check(views: ReadonlyMap<string, RaftLogView>): void {
    for (const [name, view] of views) {
      if (view.servingTerm !== undefined) {
        if (view.servingTerm !== view.status.term || view.coreRole !== 'leader') {
          throw new SafetyViolation(
            'serving only while leading',
            `${name} serves clients as the leader of term ${view.servingTerm}, but its consensus core is ${view.coreRole} in term ${view.status.term}`,
          );
        }
        this.checkLeader(name, view);
      }
      this.checkCommitted(name, view);
    }
    const names = [...views.keys()];
    for (let i = 0; i < names.length; i++) {
      for (let j = i + 1; j < names.length; j++) this.checkMatching(names[i]!, views.get(names[i]!)!, names[j]!, views.get(names[j]!)!);
    }
  }

  /** A node restarted: its commit index starts over from what it recovered. */
  restarted(name: string): void {
    this.checkedThrough.delete(name);
  }

  get highestCommitted(): number {
    return this.maxCommitted;
  }

  /** The term of the highest entry known committed (0 when none). */
  get highestCommittedTerm(): number {
    return this.committed.get(this.maxCommitted)?.term ?? 0;
  }

  /**
   * Durability: every entry known committed is on the disks (what survives a
   * power loss) of a majority. `durable` says, per node, whether its disk
   * holds index i with term t; nodes whose storage was damaged or wiped by the
   * fault injector count as holding everything (they are the minority the
   * fault model allows to lose data).
   */
  checkDurable(nodes: number, durable: readonly DurableLog[], damaged: number): void {
    // Up to the lowest snapshot on any disk, every disk holds every entry.
    const from = Math.min(...durable.map((d) => d.through)) + 1;
    const now = this.votersAt(Infinity, nodes);
    for (let index = from; index <= this.maxCommitted; index++) {
      const c = this.committed.get(index);
      if (c === undefined) continue;
      // The majority of the membership in effect at the entry, or of today's if smaller (a member
      // removed since: its disk may be gone). One voter changes at a time, so these overlap.
      let voters = Math.min(this.votersAt(index, nodes), now);
      for (const [at, n] of this.held) if (at > index && n < voters) voters = n;
      const majority = Math.floor(voters / 2) + 1;
      let copies = damaged;
      for (const d of durable) if (d.has(index, c.term)) copies++;
      if (copies < majority) {
        throw new SafetyViolation('durability', `index ${index} (term ${c.term}) is committed but on the disks of only ${copies - damaged} node(s) (${damaged} with damaged storage), fewer than a majority of ${majority}`);
      }
    }
  }

  /**
   * The entries `name` counts as on its disk (up to its durable index) are on
   * it, as a power loss would leave it. Raft's commit rule rests on this: an
   * acknowledgement, or a leader counting itself, promises the entry survives.
   */
  checkOwnDurable(name: string, view: RaftLogView, disk: DurableLog): void {
    const through = Math.min(view.durableIndex, view.status.lastIndex);
    for (let index = view.status.snapshot + 1; index <= through; index++) {
      const term = view.termAt(index)!;
      if (!disk.has(index, term)) {
        throw new SafetyViolation('durable means durable', `${name} counts index ${index} (term ${term}) as written, through ${view.durableIndex}, but its disk does not hold it`);
      }
    }
  }

  /** A committed membership entry at `index` has `voters` voters (each index recorded once). */
  private recordVoters(index: number, voters: number): void {
    if (this.voterCounts.some((c) => c.index === index)) return;
    this.voterCounts.push({ index, voters });
    this.voterCounts.sort((a, b) => a.index - b.index);
  }

  /** Voters of the membership in effect at `index` (the latest committed membership entry at or before it). */
  private votersAt(index: number, initial: number): number {
    let voters = initial;
    for (const c of this.voterCounts) if (c.index <= index) voters = c.voters;
    return voters;
  }

  private checkLeader(name: string, view: RaftLogView): void {
    const term = view.status.term;
    const known = this.leaders.get(term);
    if (known === undefined) {
      this.leaders.set(term, name);
      this.onLeader(name, term, view);
      // Newly elected: it must hold everything committed so far in earlier terms (a leader of an
      // older term can still be elected late, on votes cast before its voters moved on; it commits
      // nothing, as its appends meet the newer term). What counts is the term the entry was
      // committed in, not its own: a term-4 leader committing a term-2 entry after a late term-3
      // leader was elected does not oblige that one (seed 565624).
      for (let index = view.status.snapshot + 1; index <= this.maxCommitted; index++) {
        const c = this.committed.get(index);
        if (c === undefined || c.inTerm >= term) continue;
        const t = view.termAt(index);
        if (t !== c.term) {
          throw new SafetyViolation(
            'leader completeness',
            `${name} leads term ${term} but its log has ${t === undefined ? 'no entry' : `term ${t}`} at index ${index}, committed in term ${c.term} (reported by ${c.by})`,
          );
        }
      }
    } else if (known !== name) {
      throw new SafetyViolation('election safety', `term ${term} has two leaders: ${known} and ${name}`);
    }
  }

  private checkCommitted(name: string, view: RaftLogView): void {
    const commit = view.status.commit;
    // The membership the node holds, committed or not: a leader counts a majority of its latest one
    // for every entry (Raft's single-server changes), so an entry before it may commit on fewer disks.
    const { membershipIndex, members } = view.status;
    if (membershipIndex > 0) this.held.set(membershipIndex, Math.min(this.held.get(membershipIndex) ?? Infinity, members.filter((m) => m.voter).length));
    // A committed membership entry this node's snapshot already covers is not read below.
    if (membershipIndex > 0 && membershipIndex <= commit) this.recordVoters(membershipIndex, members.filter((m) => m.voter).length);
    const from = Math.max(this.checkedThrough.get(name) ?? 0, view.status.snapshot) + 1;
    for (let index = from; index <= commit; index++) {
      const term = view.termAt(index);
      const command = view.commandAt(index);
      if (term === undefined || command === undefined) continue;
      const c = this.committed.get(index);
      if (c === undefined) {
        this.committed.set(index, { term, inTerm: Math.max(term, view.status.term), command, by: name });
        if (index > this.maxCommitted) this.maxCommitted = index;
        if (command.startsWith('@members ')) this.recordVoters(index, command.slice('@members '.length).split(',').filter((m) => !m.endsWith('~learner')).length);
      } else if (c.term !== term || c.command !== command) {
        throw new SafetyViolation(
          'state-machine safety',
          `index ${index} is committed as term ${c.term} "${c.command}" on ${c.by} but as term ${term} "${command}" on ${name}`,
        );
      }
    }
    if (commit > (this.checkedThrough.get(name) ?? 0)) this.checkedThrough.set(name, commit);
  }

  private checkMatching(a: string, va: RaftLogView, b: string, vb: RaftLogView): void {
    const low = Math.max(va.status.snapshot, vb.status.snapshot) + 1;
    const high = Math.min(va.status.lastIndex, vb.status.lastIndex);
    // From the top down: once two entries share a term, everything below them must be identical.
    let matched = false;
    for (let index = high; index >= low; index--) {
      const ta = va.termAt(index);
      const tb = vb.termAt(index);
      if (ta === undefined || tb === undefined) continue;
      if (ta === tb) {
        if (va.commandAt(index) !== vb.commandAt(index)) {
          throw new SafetyViolation('log matching', `index ${index} term ${ta} holds different commands on ${a} and ${b}`);
        }
        matched = true;
      } else if (matched) {
        throw new SafetyViolation('log matching', `${a} and ${b} agree at a later index but differ at ${index} (terms ${ta} and ${tb})`);
      }
    }
  }
}
