/**
 * The membership API of a Raft node (what `/members` and `ticketing member`
 * call): list the members, change them one at a time through the log, and
 * hand leadership over. Only the leader changes anything; every answer says
 * what happened or why not, and a change is reported done only once it has
 * committed.
 */
import { MembershipRefused } from '../errors.js';
import type { MembershipControl, MembershipRequest, MembershipView } from '../node/node-view.js';
import type { Clock } from '../seams/clock.js';
import { applyChange, decodeConfiguration, encodeConfiguration, MEMBER_NAME } from './configuration.js';
import type { RaftCore } from './raft-core.js';

/** What the membership API needs of its Raft node. */
export interface MembershipHost {
  core(): RaftCore;
  readonly clock: Clock;
  /** Heard from `name` within the failover timeout (the leader's view; see RaftMode.peers). */
  reachable(name: string): boolean;
  /** The core's configuration may have changed, and it has messages to send: act on both now. */
  changed(): void;
  /** A rare path was taken (the simulator counts them: seams/environment.ts). */
  reached(path: string): void;
}

const POLL_MS = 5;

export class RaftMembership implements MembershipControl {
  constructor(private readonly host: MembershipHost) {}

  view(): MembershipView {
    const core = this.host.core();
    const progress = new Map(core.followers().map((f) => [f.id, f]));
    return {
      members: core.configuration.members.map((m) => {
        const f = progress.get(m.name);
        return {
          name: m.name,
          address: m.address,
          voter: m.voter,
          leader: m.name === core.leader,
          self: m.name === core.id,
          reachable: m.name === core.id || this.host.reachable(m.name),
          ...(f === undefined ? {} : { lag: Math.max(0, core.lastIndex - f.match) }),
        };
      }),
      index: core.configurationIndex,
      committed: core.configurationIndex <= core.commit,
      term: core.term,
      leader: core.leader,
    };
  }

  async change(request: MembershipRequest, timeoutMs: number): Promise<MembershipView> {
    if (!MEMBER_NAME.test(request.name)) throw new MembershipRefused(`bad member name ${JSON.stringify(request.name.slice(0, 70))}`, { status: 400 });
    const core = this.leaderCore();
    const next = applyChange(core.configuration, request);
    if (typeof next === 'string') throw new MembershipRefused(next, { status: 409 });
    // The address, checked as an entry would be (HOST:PORT, the peer port one above it).
    try {
      decodeConfiguration(encodeConfiguration(next));
    } catch (err) {
      throw new MembershipRefused((err as Error).message, { status: 400 });
    }
    if (request.op === 'promote') {
      const behind = core.followers().find((f) => f.id === request.name);
      if (behind === undefined || behind.match < core.commit) {
        const lag = behind === undefined ? 'not heard from' : `${core.commit - behind.match} committed entries behind`;
        throw new MembershipRefused(`${request.name} is ${lag}: promote it once it has caught up (member list shows its lag)`, { status: 409 });
      }
    }
    const index = core.proposeConfiguration(next);
    if (typeof index === 'string') throw new MembershipRefused(index, { status: 409 });
    this.host.changed();
    const term = core.term;
    const ok = await this.until(() => core.commit >= index || core.role !== 'leader' || core.term !== term, timeoutMs);
    if (core.commit >= index && core.term === term) {
      this.host.reached(`raft.member.${request.op}`);
      return this.view();
    }
    const why = ok ? 'this node stopped leading before it committed' : `it did not commit within ${timeoutMs} ms`;
    throw new MembershipRefused(`the change was appended at index ${index} but ${why}: it may still take effect; see member list`, { status: ok ? 409 : 504 });
  }

  async transfer(to: string | undefined, timeoutMs: number): Promise<string> {
    const core = this.leaderCore();
    if (to === core.id) return core.id;
    if (to !== undefined && !core.configuration.members.some((m) => m.name === to && m.voter)) {
      throw new MembershipRefused(`${to} is not a voter`, { status: 400 });
    }
    const target = core.transferLeadership(to);
    if (target === undefined) throw new MembershipRefused('there is no other voter to hand leadership to', { status: 409 });
    this.host.changed();
    await this.until(() => core.role !== 'leader' && core.leader !== undefined, timeoutMs);
    if (core.role !== 'leader' && core.leader !== undefined) return core.leader;
    throw new MembershipRefused(`${target} did not take over within ${timeoutMs} ms`, { status: 504 });
  }

  private leaderCore(): RaftCore {
    const core = this.host.core();
    if (core.role !== 'leader') {
      const leader = core.leader === undefined ? 'no leader is known yet' : `the leader is ${core.leader}`;
      throw new MembershipRefused(`this node is not the leader (${leader}): ask the leader's admin listener`, { status: 409, ...(core.leader === undefined ? {} : { leader: core.leader }) });
    }
    return core;
  }

  /** Resolves true once `cond` holds, false when `ms` passed first (polled on the node's clock). */
  private async until(cond: () => boolean, ms: number): Promise<boolean> {
    const deadline = this.host.clock.now() + ms;
    while (!cond()) {
      if (this.host.clock.now() >= deadline) return false;
      await new Promise<void>((resolve) => this.host.clock.schedule(POLL_MS, resolve));
    }
    return true;
  }
}
