/**
 * RaftCore, one scenario per section of the Raft paper (and the PreVote and
 * CheckQuorum extensions), on a scripted network where the test decides
 * what is delivered and when.
 */
import { describe, expect, it } from 'vitest';
import { RaftCore } from '../../src/raft/raft-core.js';
import type { Entry, Message } from '../../src/raft/types.js';
import { applyChange, decodeConfiguration, type Configuration, type MembershipChange } from '../../src/raft/configuration.js';

/** A scripted cluster: every node persists instantly; messages wait until the test delivers them. */
class Net {
  readonly nodes = new Map<string, RaftCore>();
  queue: Message[] = [];
  readonly down = new Set<string>();
  readonly applied = new Map<string, Entry[]>();

  constructor(ids: string[], electionTicks = 10) {
    let seed = 1;
    for (const id of ids) {
      // Deterministic, and different per node so timeouts differ.
      const random = () => ((seed = (seed * 16807) % 2147483647) / 2147483647);
      this.nodes.set(id, new RaftCore({ id, peers: ids, electionTicks, heartbeatTicks: 1, random }));
      this.applied.set(id, []);
    }
  }

  get(id: string): RaftCore {
    return this.nodes.get(id)!;
  }

  /** Runs every node's Ready (all persisted at once) and collects its messages. */
  flush(): void {
    for (const [id, n] of this.nodes) {
      if (this.down.has(id)) continue;
      while (n.hasReady()) {
        const rd = n.ready();
        this.queue.push(...rd.sendNow, ...rd.sendAfterPersist);
        // Membership entries are the consensus layer's own: what is applied is the lock commands.
        this.applied.get(id)!.push(...rd.committed.filter((e) => !e.command.startsWith('@members ')));
        n.advance(rd);
      }
    }
  }

  /** Delivers queued messages (those `filter` accepts; others are dropped) until none are left. */
  deliver(filter: (m: Message) => boolean = () => true, rounds = 50): void {
    for (let r = 0; r < rounds; r++) {
      this.flush();
      const batch = this.queue;
      this.queue = [];
      if (batch.length === 0) return;
      for (const m of batch) if (!this.down.has(m.to) && !this.down.has(m.from) && filter(m)) this.get(m.to).step(m);
    }
  }

  tick(id: string, times = 1): void {
    for (let i = 0; i < times; i++) this.get(id).tick();
  }

  /** Ticks `id` until it starts an election, then lets the election run. */
  elect(id: string, filter?: (m: Message) => boolean): void {
    const n = this.get(id);
    for (let i = 0; i < 100 && n.role === 'follower'; i++) n.tick();
    this.deliver(filter);
  }

  leaders(): string[] {
    return [...this.nodes].filter(([id, n]) => !this.down.has(id) && n.role === 'leader').map(([id]) => id);
  }
}

const commands = (n: RaftCore, from = 1) =>
  n
    .slice(from, n.lastIndex)
    .map((e) => e.command)
    .filter((c) => !c.startsWith('@members '));

describe('RaftCore', () => {
  describe('leader election (paper 5.2)', () => {
    it('a single node elects itself and commits its own entries', () => {
      const net = new Net(['a']);
      net.elect('a');
      expect(net.get('a').role).toBe('leader');
      net.get('a').propose(['x']);
      net.flush();
      expect(net.get('a').commit).toBe(3); // the term's no-op, the cluster's first membership entry, then x
      expect(net.applied.get('a')!.map((e) => e.command)).toEqual(['', 'x']);
    });

    it('writes the commit index with the next entries, never in a synced write of its own', () => {
      // A record for a commit alone cost every commit one more synced write on every node.
      const net = new Net(['a', 'b', 'c']);
      net.elect('a');
      const a = net.get('a');
      const b = net.get('b');
      a.propose(['x']);
      // The leader's append reaches b; b writes the entry (and whatever hard state it owes with it).
      const append = () => {
        const rd = a.ready();
        for (const m of [...rd.sendNow, ...rd.sendAfterPersist]) if (m.to === 'b' || m.to === 'c') net.get(m.to).step(m);
        a.advance(rd);
      };
      append();
      for (const n of [b, net.get('c')]) {
        const rd = n.ready();
        for (const m of rd.sendAfterPersist) a.step(m);
        n.advance(rd);
      }
      expect(a.commit).toBe(a.lastIndex);
      // The leader's commit moved: nothing to write for it alone.
      const leaderRd = a.ready();
      expect(leaderRd.entries).toEqual([]);
      expect(leaderRd.hardState).toBeUndefined();
      a.advance(leaderRd);
      // b learns the commit from a heartbeat: it applies, and writes nothing.
      a.tick();
      const hb = a.ready();
      for (const m of hb.sendNow) if (m.to === 'b') b.step(m);
      a.advance(hb);
      expect(b.commit).toBe(a.commit);
      const followerRd = b.ready();
      expect(followerRd.hardState).toBeUndefined();
      expect(followerRd.committed.map((e) => e.command)).toContain('x');
      b.advance(followerRd);
      // The next entries carry it.
      a.propose(['y']);
      append();
      expect(b.ready().hardState).toMatchObject({ commit: a.commit });
    });

    it('elects exactly one leader in a three-node cluster, and followers learn it', () => {
      const net = new Net(['a', 'b', 'c']);
      net.elect('a');
      expect(net.leaders()).toEqual(['a']);
      expect(net.get('b').leader).toBe('a');
      expect(net.get('c').leader).toBe('a');
      expect(net.get('b').term).toBe(net.get('a').term);
    });

    it('grants at most one vote per term, and remembers it across a restart', () => {
      const net = new Net(['a', 'b', 'c']);
      const c = net.get('c');
      c.step({ type: 'vote', from: 'a', to: 'c', term: 1, lastIndex: 0, lastTerm: 0, pre: false, transfer: false, founders: '' });
      c.step({ type: 'vote', from: 'b', to: 'c', term: 1, lastIndex: 0, lastTerm: 0, pre: false, transfer: false, founders: '' });
      const rd = c.ready();
      expect(rd.hardState).toEqual({ term: 1, vote: 'a', commit: 0, membership: 'unknown' });
      const answers = rd.sendAfterPersist.filter((m) => m.type === 'vote-resp');
      expect(answers.map((m) => [m.to, m.type === 'vote-resp' && m.granted])).toEqual([
        ['a', true],
        ['b', false],
      ]);
      // After a restart from the persisted state, still no second vote in term 1.
      const restarted = new RaftCore({ id: 'c', peers: ['a', 'b', 'c'], electionTicks: 10, heartbeatTicks: 1, random: () => 0 }, { hardState: rd.hardState!, snapshot: { index: 0, term: 0 }, entries: [] });
      restarted.step({ type: 'vote', from: 'b', to: 'c', term: 1, lastIndex: 0, lastTerm: 0, pre: false, transfer: false, founders: '' });
      const again = restarted.ready().sendAfterPersist.find((m) => m.type === 'vote-resp');
      expect(again).toMatchObject({ granted: false });
    });

    it('does not elect a candidate whose log is behind (election restriction, 5.4.1)', () => {
      const net = new Net(['a', 'b', 'c']);
      net.elect('a');
      net.get('a').propose(['x', 'y']);
      net.deliver((m) => m.to !== 'c' && m.from !== 'c'); // c misses x and y
      net.down.add('a');
      // c campaigns first: b, whose log is longer, refuses it.
      net.elect('c', (m) => m.from !== 'a' && m.to !== 'a');
      expect(net.get('c').role).not.toBe('leader');
      net.elect('b', (m) => m.from !== 'a' && m.to !== 'a');
      expect(net.get('b').role).toBe('leader');
    });
  });

  describe('log replication (paper 5.3)', () => {
    it('replicates and commits by majority, and followers apply in order', () => {
      const net = new Net(['a', 'b', 'c']);
      net.elect('a');
      net.get('a').propose(['x', 'y']);
      net.deliver();
      net.tick('a'); // a heartbeat carries the commit index to followers
      net.deliver();
      for (const id of ['a', 'b', 'c']) expect(net.applied.get(id)!.map((e) => e.command)).toEqual(['', 'x', 'y']);
    });

    it('commits with one follower down, not with two', () => {
      const net = new Net(['a', 'b', 'c']);
      net.elect('a');
      net.down.add('c');
      net.get('a').propose(['x']);
      net.deliver();
      expect(net.get('a').commit).toBe(net.get('a').lastIndex);
      net.down.add('b');
      net.get('a').propose(['y']);
      net.deliver();
      expect(net.get('a').commit).toBe(net.get('a').lastIndex - 1);
    });

    it('overwrites a follower’s uncommitted conflicting entries with the leader’s', () => {
      const net = new Net(['a', 'b', 'c']);
      net.elect('a');
      // a appends entries only it has, then loses leadership.
      net.get('a').propose(['lost-1', 'lost-2']);
      net.queue = [];
      net.down.add('a');
      net.tick('c', 10); // c's leader lease runs out: it will vote again
      net.elect('b');
      expect(net.get('b').role).toBe('leader');
      net.get('b').propose(['kept']);
      net.deliver();
      net.down.delete('a');
      net.tick('b');
      net.deliver();
      expect(commands(net.get('a'))).toEqual(commands(net.get('b')));
      expect(commands(net.get('a'))).toContain('kept');
      expect(commands(net.get('a'))).not.toContain('lost-1');
    });
  });

  describe('safety (paper 5.4.2, figure 8)', () => {
    it('never commits an entry of an earlier term by counting replicas, only through one of its own term', () => {
      // Figure 8 (c): S1 returns as leader of term 4 with an entry of term 2 that it then copies to a majority.
      const peers = ['s1', 's2', 's3', 's4', 's5'];
      const s1 = new RaftCore(
        { id: 's1', peers, electionTicks: 10, heartbeatTicks: 1, random: () => 0 },
        { hardState: { term: 3, vote: undefined, commit: 1 }, snapshot: { index: 0, term: 0 }, entries: [{ index: 1, term: 1, command: 'a' }, { index: 2, term: 2, command: 'b' }] },
      );
      for (let i = 0; i < 30 && s1.role === 'follower'; i++) s1.tick();
      for (const from of ['s2', 's3']) s1.step({ type: 'vote-resp', from, to: 's1', term: 4, granted: true, pre: true, empty: false });
      for (const from of ['s2', 's3']) s1.step({ type: 'vote-resp', from, to: 's1', term: 4, granted: true, pre: false, empty: false });
      expect(s1.role).toBe('leader');
      expect(s1.term).toBe(4);
      s1.advance(s1.ready()); // its own log (with the term-4 no-op at 3) is durable
      const ack = (from: string, match: number) => s1.step({ type: 'append-resp', from, to: 's1', term: 4, success: true, match, hint: 0, rejected: 0 });
      ack('s2', 2);
      ack('s3', 2);
      // Entry 2 (term 2) is on s1, s2, s3: a majority, yet not committed.
      expect(s1.commit).toBe(1);
      ack('s2', 3);
      expect(s1.commit).toBe(1);
      ack('s3', 3);
      // The term-4 entry on a majority commits itself and everything before it.
      expect(s1.commit).toBe(3);
    });
  });

  describe('PreVote and CheckQuorum', () => {
    it('a node cut off from the cluster does not raise its term, and does not disrupt the leader when it returns', () => {
      const net = new Net(['a', 'b', 'c']);
      net.elect('a');
      const term = net.get('a').term;
      // c is partitioned away and times out many times.
      for (let i = 0; i < 200; i++) {
        net.tick('c');
        net.deliver((m) => m.from !== 'c' && m.to !== 'c');
      }
      expect(net.get('c').term).toBe(term);
      // Back: the leader stays leader, in the same term.
      for (let i = 0; i < 5; i++) {
        net.tick('a');
        net.tick('c');
        net.deliver();
      }
      expect(net.get('a').role).toBe('leader');
      expect(net.get('a').term).toBe(term);
      expect(net.get('c').leader).toBe('a');
    });

    it('a leader that cannot reach a majority steps down after an election timeout', () => {
      const net = new Net(['a', 'b', 'c']);
      net.elect('a');
      net.down.add('b');
      net.down.add('c');
      for (let i = 0; i < 25; i++) {
        net.tick('a');
        net.deliver();
      }
      expect(net.get('a').role).toBe('follower');
    });

    it('followers that hear from a leader refuse votes to a disruptive candidate', () => {
      const net = new Net(['a', 'b', 'c']);
      net.elect('a');
      const b = net.get('b');
      b.step({ type: 'vote', from: 'c', to: 'b', term: b.term + 5, lastIndex: 100, lastTerm: 100, pre: false, transfer: false, founders: '' });
      expect(b.term).toBe(net.get('a').term);
      expect(b.leader).toBe('a');
    });
  });

  describe('replacing a node', () => {
    it('a joining node does not vote until it has heard from a leader', () => {
      const j = new RaftCore({ id: 'c', peers: ['a', 'b', 'c'], electionTicks: 10, heartbeatTicks: 1, random: () => 0, joining: true });
      j.step({ type: 'vote', from: 'a', to: 'c', term: 5, lastIndex: 10, lastTerm: 4, pre: false, transfer: false, founders: '' });
      expect(j.ready().sendAfterPersist.find((m) => m.type === 'vote-resp')).toMatchObject({ granted: false });
      j.step({ type: 'heartbeat', from: 'b', to: 'c', term: 6, commit: 0, commitTerm: 0, read: 0 });
      j.ready();
      for (let i = 0; i < 30; i++) j.tick(); // the leader's lease runs out
      j.step({ type: 'vote', from: 'a', to: 'c', term: 7, lastIndex: 10, lastTerm: 4, pre: false, transfer: false, founders: '' });
      expect(j.ready().sendAfterPersist.find((m) => m.type === 'vote-resp')).toMatchObject({ granted: true });
    });
  });

  describe('replacing a node: catching up first (issue 12, defect 6)', () => {
    const recovered = (membership: 'member' | 'joining' | 'unknown') => ({
      hardState: { term: 0, vote: undefined, commit: 0, membership },
      snapshot: { index: 0, term: 0 },
      entries: [],
    });
    /** Whether `core` grants a vote to a candidate with a longer log (no answer counts as no). */
    const votesFor = (core: RaftCore, term: number): boolean => {
      core.step({ type: 'vote', from: 'a', to: 'c', term, lastIndex: 10, lastTerm: 4, pre: false, transfer: false, founders: '' });
      const resp = core.ready().sendAfterPersist.find((m) => m.type === 'vote-resp');
      return resp?.type === 'vote-resp' && resp.granted;
    };

    it('a joining node neither votes nor campaigns until it has reached the leader commit it first heard of', () => {
      const j = new RaftCore({ id: 'c', peers: ['a', 'b', 'c'], electionTicks: 10, heartbeatTicks: 1, random: () => 0, joining: true });
      j.ready();
      j.step({ type: 'heartbeat', from: 'b', to: 'c', term: 6, commit: 3, commitTerm: 6, read: 0 });
      j.ready();
      for (let i = 0; i < 30; i++) j.tick(); // the leader's lease runs out: a member would campaign now
      expect(j.role).toBe('follower');
      expect(votesFor(j, 7)).toBe(false);
    });

    it('remembers that it is joining across a restart (membership is in the hard state)', () => {
      const j = new RaftCore({ id: 'c', peers: ['a', 'b', 'c'], electionTicks: 10, heartbeatTicks: 1, random: () => 0 }, recovered('joining'));
      expect(votesFor(j, 5)).toBe(false);
    });

    it('an empty disk started without --raft-join joins once a leader shows committed entries', () => {
      const fresh = new RaftCore({ id: 'c', peers: ['a', 'b', 'c'], electionTicks: 10, heartbeatTicks: 1, random: () => 0 }, recovered('unknown'));
      fresh.step({ type: 'heartbeat', from: 'b', to: 'c', term: 6, commit: 3, commitTerm: 6, read: 0 });
      expect(fresh.joinedAutomatically).toBe(true);
      expect(fresh.ready().hardState).toMatchObject({ membership: 'joining' });
      for (let i = 0; i < 30; i++) fresh.tick();
      expect(votesFor(fresh, 7)).toBe(false);
      // A new cluster's empty nodes still vote for each other (no committed state anywhere yet).
      const bootstrap = new RaftCore({ id: 'c', peers: ['a', 'b', 'c'], electionTicks: 10, heartbeatTicks: 1, random: () => 0 }, recovered('unknown'));
      bootstrap.step({ type: 'vote', from: 'a', to: 'c', term: 1, lastIndex: 0, lastTerm: 0, pre: false, transfer: false, founders: '' });
      expect(bootstrap.ready().sendAfterPersist.find((m) => m.type === 'vote-resp')).toMatchObject({ granted: true });
    });

    it('a new cluster\'s node that took entries before anything committed stays a member (seed 610610)', () => {
      const c = new RaftCore({ id: 'c', peers: ['a', 'b', 'c'], electionTicks: 10, heartbeatTicks: 1, random: () => 0 }, recovered('unknown'));
      // The first leader's first entry: it has committed nothing, so this is a new cluster and c is in it.
      c.step({ type: 'append', from: 'a', to: 'c', term: 1, prevIndex: 0, prevTerm: 0, entries: [{ index: 1, term: 1, command: '' }], commit: 0 });
      expect(c.ready().hardState).toMatchObject({ membership: 'member' });
      // A later leader's append that c cannot take yet, carrying a commit: c is no replaced member.
      c.step({ type: 'append', from: 'b', to: 'c', term: 2, prevIndex: 3, prevTerm: 2, entries: [], commit: 1 });
      expect(c.joinedAutomatically).toBe(false);
      c.ready();
      // That leader dies: c must still vote, or two such nodes and a replaced third can elect no one.
      for (let i = 0; i < 30; i++) c.tick();
      expect(votesFor(c, 4)).toBe(true);
    });

    it('a heartbeat commits only through an entry the follower holds with the leader term', () => {
      const f = new RaftCore({ id: 'c', peers: ['a', 'b', 'c'], electionTicks: 10, heartbeatTicks: 1, random: () => 0 }, {
        hardState: { term: 2, vote: undefined, commit: 0 },
        snapshot: { index: 0, term: 0 },
        entries: [1, 2, 3].map((index) => ({ index, term: 1, command: '' })),
      });
      f.step({ type: 'heartbeat', from: 'a', to: 'c', term: 3, commit: 3, commitTerm: 2, read: 0 }); // the leader's entry 3 is of term 2
      expect(f.commit).toBe(0);
      f.step({ type: 'heartbeat', from: 'a', to: 'c', term: 3, commit: 3, commitTerm: 1, read: 0 });
      expect(f.commit).toBe(3);
    });
  });

  describe('a follower that does not answer', () => {
    it('a new leader probes it again where it was, not from the start of the log (defect 10)', () => {
      const net = new Net(['a', 'b', 'c']);
      net.elect('a');
      net.get('a').propose(['1', '2', '3', '4', '5']);
      net.deliver();
      net.tick('a');
      net.deliver();
      net.down.add('a');
      net.tick('c', 10); // c stops hearing a (its CheckQuorum lease runs out)
      // b wins with c's vote, but its first append to c is lost.
      net.elect('b', (m) => !(m.to === 'c' && (m.type === 'append' || m.type === 'heartbeat')));
      const b = net.get('b');
      expect(b.role).toBe('leader');
      const toC: Message[] = [];
      net.tick('b'); // a heartbeat passes without an answer from c
      net.deliver((m) => (m.to === 'c' && toC.push(m), true));
      const probe = toC.find((m) => m.type === 'append' || m.type === 'snapshot');
      expect(probe).toMatchObject({ type: 'append' });
      expect((probe as Extract<Message, { type: 'append' }>).prevIndex).toBeGreaterThanOrEqual(5);
      expect(net.get('c').lastIndex).toBe(b.lastIndex);
    });
  });

  describe('snapshots', () => {
    it('sends a lagging follower a snapshot, then the entries after it', () => {
      const net = new Net(['a', 'b', 'c']);
      net.elect('a');
      net.down.add('c');
      net.get('a').propose(['1', '2', '3', '4']);
      net.deliver();
      net.tick('a');
      net.deliver();
      const a = net.get('a');
      a.compact(a.appliedIndex);
      net.down.delete('c');
      const sent: Message[] = [];
      for (let i = 0; i < 5; i++) {
        net.tick('a');
        net.deliver((m) => (sent.push(m), true));
      }
      expect(sent.some((m) => m.type === 'snapshot' && m.to === 'c')).toBe(true);
      const c = net.get('c');
      expect(c.snapshotIndex).toBe(a.snapshotIndex);
      a.propose(['5']);
      net.deliver();
      net.tick('a');
      net.deliver();
      expect(c.commit).toBe(a.commit);
      expect(c.slice(c.lastIndex, c.lastIndex)[0]!.command).toBe('5');
    });

    it('a snapshot that replaces a longer log leaves none of it counted as written (defect 5)', () => {
      const net = new Net(['a', 'b', 'c']);
      net.elect('a');
      const a = net.get('a');
      // a writes entries no follower ever gets, then loses leadership.
      a.propose(['lost-1', 'lost-2', 'lost-3', 'lost-4', 'lost-5', 'lost-6']);
      net.flush();
      net.queue = [];
      expect(a.durableIndex).toBe(a.lastIndex);
      net.down.add('a');
      net.tick('c', 10);
      net.elect('b');
      const b = net.get('b');
      b.propose(['kept-1', 'kept-2']);
      net.deliver();
      net.tick('b');
      net.deliver();
      b.compact(b.appliedIndex);
      // The snapshot ends inside a's longer log, on an entry a holds with another term: a must replace its log.
      expect(b.snapshotIndex).toBeLessThan(a.lastIndex);
      expect(a.termAt(b.snapshotIndex)).not.toBe(b.termAt(b.snapshotIndex));
      net.down.delete('a');
      let install: Message | undefined;
      for (let i = 0; i < 10 && install === undefined; i++) {
        net.tick('b');
        net.deliver((m) => {
          if (m.type !== 'snapshot' || m.to !== 'a') return true;
          install = m;
          return false;
        });
      }
      expect(install).toBeDefined();
      a.step(install!);
      // Accepted, not yet persisted: nothing after the snapshot is on a's disk. Counting the old
      // log's length as written would let a, once leader, count entries it has not written.
      expect(a.snapshotIndex).toBe(b.snapshotIndex);
      expect(a.durableIndex).toBeLessThanOrEqual(a.snapshotIndex);
      net.deliver();
      net.tick('b');
      net.deliver();
      expect(commands(a)).toEqual(commands(b));
      expect(a.durableIndex).toBe(a.lastIndex);
    });

    it('a snapshot the follower holds the last entry of carries the kept entries with it, written once (issue 27, D-1)', () => {
      const net = new Net(['a', 'b', 'c']);
      net.elect('a');
      const a = net.get('a');
      a.propose(['1', '2', '3', '4', '5']);
      net.deliver();
      const c = net.get('c');
      expect(c.lastIndex).toBe(7); // the no-op, the first membership entry, 1..5
      expect(c.durableIndex).toBe(7);
      const commitBefore = c.commit;
      c.step({ type: 'snapshot', from: 'a', to: 'c', term: a.term, snapshot: { index: 5, term: a.termAt(5)! } });
      expect(commitBefore).toBeLessThan(5);
      const rd = c.ready();
      expect(rd.snapshot?.index).toBe(5);
      expect(rd.entries.map((e) => e.index)).toEqual([6, 7]);
      c.advance(rd);
      // Nothing of the kept suffix is written again (a torn second copy cut entries off: D-1).
      while (c.hasReady()) {
        const next = c.ready();
        expect(next.entries).toEqual([]);
        c.advance(next);
      }
      expect(c.durableIndex).toBe(7);
    });
  });

  describe('membership changes (thesis 4.1)', () => {
    /** A cluster of `ids`, with `extra` nodes that start empty knowing the whole list. */
    function grow(ids: string[], extra: string[] = []): Net {
      const net = new Net([...ids, ...extra]);
      // The extra nodes are not members yet: the founders know only `ids`.
      let seed = 7;
      for (const id of ids) {
        const random = () => ((seed = (seed * 16807) % 2147483647) / 2147483647);
        net.nodes.set(id, new RaftCore({ id, peers: ids, electionTicks: 10, heartbeatTicks: 1, random }));
      }
      return net;
    }
    const change = (n: RaftCore, c: MembershipChange) => {
      const next = applyChange(n.configuration, c);
      if (typeof next === 'string') throw new Error(next);
      return n.proposeConfiguration(next);
    };
    const names = (c: Configuration) => c.members.map((m) => `${m.name}${m.voter ? '' : '~'}`).join(',');
    /** Voters a, b, c (a leading) and the learner d, added and caught up. */
    function withLearner(): { net: Net; a: RaftCore; d: RaftCore } {
      const net = grow(['a', 'b', 'c'], ['d']);
      net.elect('a');
      net.tick('a');
      net.deliver();
      const a = net.get('a');
      expect(typeof change(a, { op: 'add', name: 'd', address: 'd:5225' })).toBe('number');
      net.deliver();
      net.tick('a');
      net.deliver();
      return { net, a, d: net.get('d') };
    }

    it('empty nodes found a cluster only when every --peers node holds nothing (item 1)', () => {
      const five = ['a', 'b', 'c', 'd', 'e'];
      const net = new Net(five);
      // a and b hold a log (another cluster's, or this one's); c, d and e are empty.
      const held = { hardState: { term: 3, vote: 'a', commit: 1, membership: 'member' as const }, snapshot: { index: 0, term: 0 }, entries: [{ index: 1, term: 3, command: '' }] };
      for (const id of ['a', 'b']) net.nodes.set(id, new RaftCore({ id, peers: ['a', 'b', 'x'], electionTicks: 10, heartbeatTicks: 1, random: () => 0.5 }, held));
      for (let i = 0; i < 30; i++) {
        for (const id of ['c', 'd', 'e']) net.tick(id);
        net.deliver();
      }
      expect(['c', 'd', 'e'].map((id) => net.get(id).role).filter((r) => r === 'leader' || r === 'candidate')).toEqual([]);
      // (Their terms may rise to what a and b answer with: they learn of a newer term, no more.)
      expect(['c', 'd', 'e'].every((id) => net.get(id).lastIndex === 0)).toBe(true);
      // All five empty: they found one.
      const fresh = new Net(five);
      fresh.elect('c');
      expect(fresh.leaders()).toEqual(['c']);
    });

    it('records the first leader\'s membership in the log, so every node holds it', () => {
      const net = new Net(['a', 'b', 'c']);
      net.elect('a');
      net.tick('a');
      net.deliver();
      for (const id of ['a', 'b', 'c']) {
        expect(net.get(id).configurationIndex).toBe(2);
        expect(names(net.get(id).configuration)).toBe('a,b,c');
      }
    });

    it('adds a learner that receives the log but neither stands for election nor counts toward a majority, then promotes it', () => {
      const { net, a, d } = withLearner();
      expect(d.commit).toBe(a.commit);
      expect(names(d.configuration)).toBe('a,b,c,d~');
      // With b and c down, a and the learner d are not a majority: nothing commits.
      net.down.add('b');
      net.down.add('c');
      a.propose(['x']);
      net.deliver();
      expect(a.commit).toBeLessThan(a.lastIndex);
      net.down.delete('b');
      net.down.delete('c');
      net.tick('a');
      net.deliver();
      expect(a.commit).toBe(a.lastIndex);
      // A learner never stands for election.
      net.tick('d', 100);
      expect(d.role).toBe('follower');
      expect(d.term).toBe(a.term);
      expect(typeof change(a, { op: 'promote', name: 'd' })).toBe('number');
      net.deliver();
      net.tick('a');
      net.deliver();
      expect(names(a.configuration)).toBe('a,b,c,d');
      // Now four voters: a majority is three, and d counts.
      net.down.add('b');
      net.down.add('c');
      a.propose(['y']);
      net.deliver();
      expect(a.commit).toBeLessThan(a.lastIndex);
    });

    it('confirms its leadership for a reply that changed nothing only by a majority of voters, never with a learner', () => {
      // A leader cut off from the other voters but not from a learner must not answer T or N from
      // its table: the voters may have elected another leader that changed the key.
      const { net, a } = withLearner();
      net.down.add('b');
      net.down.add('c');
      const round = a.confirmRead();
      net.deliver();
      expect(a.confirmedRead).toBeLessThan(round); // a and the learner d are not a majority
      net.down.delete('b');
      net.tick('a');
      net.deliver();
      expect(a.confirmedRead).toBeGreaterThanOrEqual(round); // a and b are
    });

    it('a learner votes for a candidate whose newer membership makes it a voter (sim seed 24: no leader ever again)', () => {
      const net = grow(['a', 'b', 'c'], ['d']);
      net.elect('a');
      net.tick('a');
      net.deliver();
      const a = net.get('a');
      change(a, { op: 'add', name: 'd', address: 'd:5225' });
      net.deliver();
      net.tick('a');
      net.deliver();
      // a promotes d; the entry reaches no one else (b is lost for good, c and d are cut off).
      for (const id of ['b', 'c', 'd']) net.down.add(id);
      expect(typeof change(a, { op: 'promote', name: 'd' })).toBe('number');
      net.deliver();
      expect(names(a.configuration)).toBe('a,b,c,d');
      expect(names(net.get('d').configuration)).toBe('a,b,c,d~');
      // CheckQuorum deposes a; c and d come back. a's membership has four voters: it needs c and d.
      net.tick('a', 40);
      net.deliver();
      net.down.delete('c');
      net.down.delete('d');
      for (let i = 0; i < 20 && a.role !== 'leader'; i++) {
        net.tick('a', 10);
        net.tick('c', 10);
        net.tick('d', 10);
        net.deliver();
      }
      expect(net.leaders()).toEqual(['a']);
    });

    it('makes one change at a time, only after the leader committed in its term, one voter at a time', () => {
      const net = grow(['a', 'b', 'c'], ['d', 'e']);
      net.elect('b');
      net.tick('b');
      net.deliver();
      // b goes; a wins the next term but hears no acknowledgement yet: its term's no-op has not committed.
      net.down.add('b');
      net.tick('c', 10); // c stops counting on b
      net.elect('a', (m) => m.type !== 'append-resp');
      const a = net.get('a');
      expect(change(a, { op: 'add', name: 'd', address: 'd:5225' })).toMatch(/not committed an entry of its term/);
      net.down.delete('b');
      net.tick('a');
      net.deliver();
      net.tick('a');
      net.deliver();
      net.down.add('b');
      net.down.add('c');
      expect(typeof change(a, { op: 'add', name: 'd', address: 'd:5225' })).toBe('number');
      expect(change(a, { op: 'add', name: 'e', address: 'e:5225' })).toMatch(/has not committed yet/);
      net.down.delete('b');
      net.down.delete('c');
      net.tick('a');
      net.deliver();
      // Two voters at once (d and e voting): refused.
      const two = { members: [...a.configuration.members.map((m) => ({ ...m, voter: true })), { name: 'e', address: 'e:5225', voter: true }] };
      expect(a.proposeConfiguration(two)).toMatch(/one voter at a time/);
      expect(change(a, { op: 'remove', name: 'a' })).toMatch(/cannot remove itself/);
    });

    it('a membership entry that is cut from the log takes its configuration with it', () => {
      const net = grow(['a', 'b', 'c'], ['d']);
      net.elect('a');
      net.tick('a');
      net.deliver();
      const a = net.get('a');
      // a appends the change, reaches nobody, and loses leadership.
      net.down.add('b');
      net.down.add('c');
      change(a, { op: 'add', name: 'd', address: 'd:5225' });
      expect(names(a.configuration)).toBe('a,b,c,d~');
      net.queue = [];
      net.down.add('a');
      net.down.delete('b');
      net.down.delete('c');
      net.tick('c', 10);
      net.elect('b');
      net.get('b').propose(['x']);
      net.deliver();
      net.down.delete('a');
      for (let i = 0; i < 5; i++) {
        net.tick('b');
        net.deliver();
      }
      expect(net.get('a').role).toBe('follower');
      expect(names(a.configuration)).toBe('a,b,c');
    });

    it('removes a voter: the majority shrinks with it, and the removed node no longer gets votes', () => {
      const net = new Net(['a', 'b', 'c', 'd', 'e']);
      net.elect('a');
      net.tick('a');
      net.deliver();
      const a = net.get('a');
      expect(typeof change(a, { op: 'remove', name: 'e' })).toBe('number');
      net.deliver();
      net.tick('a');
      net.deliver();
      expect(names(a.configuration)).toBe('a,b,c,d');
      expect(names(net.get('b').configuration)).toBe('a,b,c,d');
      // e never hears of its removal (the leader stops replicating to it): it still thinks it votes.
      expect(names(net.get('e').configuration)).toBe('a,b,c,d,e');
      // e asks for votes: nobody grants them.
      net.down.add('a');
      const e = net.get('e');
      e.step({ type: 'timeout-now', from: 'a', to: 'e', term: e.term });
      net.tick('e', 100);
      net.deliver((m) => m.from !== 'a' && m.to !== 'a');
      expect(e.role).not.toBe('leader');
    });

    it('snapshots carry the membership, and a node restored from one holds it', () => {
      const net = grow(['a', 'b', 'c'], ['d']);
      net.elect('a');
      net.tick('a');
      net.deliver();
      const a = net.get('a');
      change(a, { op: 'add', name: 'd', address: 'd:5225' });
      a.propose(['x', 'y']);
      net.deliver();
      net.tick('a');
      net.deliver();
      const meta = a.snapshotMeta(a.appliedIndex);
      expect(names(decodeConfiguration(meta.members!))).toBe('a,b,c,d~');
      a.compact(a.appliedIndex);
      const restored = new RaftCore({ id: 'a', peers: ['a', 'b', 'c'], electionTicks: 10, heartbeatTicks: 1, random: () => 0 }, { hardState: a.hardState, snapshot: meta, entries: [] });
      expect(names(restored.configuration)).toBe('a,b,c,d~');
      // Its --peers (a, b, c) only lag behind (d was added since): that is no reason to stand down.
      expect(restored.peersDisagree).toBe(false);
      // --peers naming a node the membership lacks (x): it does not campaign until they agree.
      const misled = new RaftCore({ id: 'a', peers: ['a', 'b', 'c', 'x'], electionTicks: 10, heartbeatTicks: 1, random: () => 0 }, { hardState: a.hardState, snapshot: meta, entries: [] });
      expect(misled.peersDisagree).toBe(true);
      const restoredCopy = misled;
      for (let i = 0; i < 100; i++) restoredCopy.tick();
      expect(restoredCopy.role).toBe('follower');
    });
  });

  describe('leadership transfer (thesis 3.10)', () => {
    it('hands over to the most caught-up voter, which wins at once even while its peers hear from the old leader', () => {
      const net = new Net(['a', 'b', 'c']);
      net.elect('a');
      const a = net.get('a');
      a.propose(['x']);
      // c misses x: b is the most caught-up.
      net.deliver((m) => m.to !== 'c');
      expect(a.transferLeadership()).toBe('b');
      net.deliver();
      expect(net.get('b').role).toBe('leader');
      expect(a.role).toBe('follower');
      expect(net.leaders()).toEqual(['b']);
    });

    it('brings a lagging target up to date first, and gives up after an election timeout', () => {
      const net = new Net(['a', 'b', 'c']);
      net.elect('a');
      const a = net.get('a');
      a.propose(['x', 'y']);
      net.deliver((m) => m.to !== 'c');
      expect(a.transferLeadership('c')).toBe('c');
      for (let i = 0; i < 3 && net.get('c').role !== 'leader'; i++) {
        net.tick('a'); // the heartbeat finds c behind: appends, then TimeoutNow once it has everything
        net.deliver();
      }
      expect(net.get('c').role).toBe('leader');
      expect(commands(net.get('c'))).toEqual(commands(a));
      // A target that never answers: the transfer is given up, the leader goes on.
      const net2 = new Net(['a', 'b', 'c']);
      net2.elect('a');
      const a2 = net2.get('a');
      net2.down.add('c');
      a2.transferLeadership('c');
      expect(a2.transferTarget).toBe('c');
      for (let i = 0; i < 10; i++) {
        net2.tick('a');
        net2.deliver();
      }
      expect(a2.transferTarget).toBeUndefined();
      expect(a2.role).toBe('leader');
    });
  });
});
