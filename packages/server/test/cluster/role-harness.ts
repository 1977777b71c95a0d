/**
 * Role machines of a small cluster on a hand-driven network, for unit and
 * property tests: no node, no sockets, no data plane beyond what the role
 * machine needs to know (which table each node holds and how far its stream
 * is). Messages are delivered when the test says so (or at once), links can
 * be cut, nodes paused (SIGSTOP) or suspended (monoStops), killed and restarted, clocks offset. Links run at
 * peer protocol 3 unless a node stands in for an older release (`v2`): as
 * the shell does, a HANDOFF carries its serial and a DECLINED is sent only
 * on a link at 3.
 */
import type { PeerInfo } from '../../src/peers/members.js';
import { parsePeers } from '../../src/peers/members.js';
import { RoleMachine, type Claim, type DataFacts, type Ready, type RoleMessage } from '../../src/cluster/role-machine.js';
import { encodePeerMessage, decodePeerMessage, type Heartbeat } from '../../src/cluster/peer-protocol.js';
import type { Token } from '../../src/state-machine/commands.js';

export const T = 500;
export const HB = 100;

export interface SimNode {
  readonly info: PeerInfo;
  machine: RoleMachine;
  alive: boolean;
  paused: boolean;
  /** While paused, its monotonic clock stops too (an OS suspend; a SIGSTOP lets it run). */
  monoStops: boolean;
  /** How far its monotonic clock fell behind the true time through suspends. */
  monoLag: number;
  /** Wall clock minus the true time. */
  wallOffset: number;
  /** The table this node would serve with (a standby's replica), or undefined. */
  replica: (Claim & { complete: boolean }) | undefined;
  /** While active: commands applied in its epoch. */
  position: number;
  /** Followers that confirmed their snapshot (an active's). */
  confirmed: Set<string>;
  /** Every Ready it produced (for assertions). */
  readies: Ready[];
  floor: Token;
  /** Epochs this node promoted in, in order. */
  epochs: Token[];
  /** When the machine asked to be ticked again (Ready.wakeAt). */
  wakeAt: number | undefined;
}

export class Cluster {
  now = 1_000_000;
  readonly nodes: SimNode[];
  /** Links that pass nothing, as "from>to". */
  readonly cut = new Set<string>();
  /** In flight: delivered by deliver(). */
  private queue: Array<{ from: string; to: string; message: RoleMessage | { type: 'handoff'; epoch: Token; position: number; serial: number | undefined }; at: number }> = [];
  /** Nodes that speak peer protocol 2 only (release 0.1.0): every link with them runs at 2. */
  readonly v2 = new Set<string>();
  /** Every DECLINED sent, in order. */
  readonly declines: Array<{ from: string; to: string; serial: number; reason: string; at: number }> = [];
  /** Messages are delivered this long after they are sent (0: at the next deliver()). */
  latency = 1;

  private readonly infos: PeerInfo[];

  constructor(names: string[], private readonly wallBase = 1_764_000_000_000) {
    this.infos = parsePeers(names.map((n, i) => `${n}=10.0.0.${i + 1}:5225`));
    this.nodes = this.infos.map((info) => this.fresh(info, 0));
  }

  private fresh(info: PeerInfo, wallOffset: number, floor?: Token, previousMembers?: readonly string[]): SimNode {
    const others = this.infos.filter((p) => p.name !== info.name);
    const node: SimNode = {
      info,
      machine: undefined as unknown as RoleMachine,
      alive: true,
      paused: false,
      monoStops: false,
      monoLag: 0,
      wallOffset,
      replica: undefined,
      position: 0,
      confirmed: new Set(),
      readies: [],
      floor: floor ?? 1n,
      epochs: [],
      wakeAt: undefined,
    };
    node.machine = new RoleMachine({ self: info, others, heartbeatMs: HB, failoverTimeoutMs: T, floor: node.floor, ...(previousMembers === undefined ? {} : { previousMembers }) }, this.at(node));
    return node;
  }

  node(name: string): SimNode {
    return this.nodes.find((n) => n.info.name === name)!;
  }

  at(n: SimNode): { mono: number; wall: number } {
    return { mono: this.now - n.monoLag, wall: this.wallBase + this.now + n.wallOffset };
  }

  facts(n: SimNode): DataFacts {
    const active = n.machine.role === 'active';
    return {
      replica: active ? undefined : n.replica,
      stream: active
        ? {
            position: n.position,
            confirmed: n.confirmed.size,
            follower: (peer) => {
              const f = this.node(peer);
              return f.alive && f.machine.leader?.name === n.info.name && f.replica?.epoch === n.machine.epoch ? { streaming: true, lagMs: 0 } : undefined;
            },
          }
        : undefined,
      tableNext: undefined,
      inbound: (peer) => !this.cut.has(`${peer}>${n.info.name}`) && this.node(peer).alive,
    };
  }

  /** Carries out what a Ready says at the level this harness models. */
  private apply(n: SimNode, r: Ready): void {
    n.readies.push(r);
    if (r.wakeAt !== undefined) n.wakeAt = r.wakeAt;
    for (const a of r.actions) {
      if (a.type === 'promote') {
        n.epochs.push(a.epoch);
        n.position = 0;
        n.confirmed.clear();
        n.replica = undefined;
      }
      if (a.type === 'follow' || a.type === 'resync') n.replica = n.replica === undefined ? undefined : { ...n.replica, complete: false };
      // The shell sends HANDOFF after the rest of the stream, with its serial on a link at 3.
      if (a.type === 'hand-off') {
        const serial = this.linkVersion(n.info.name, a.to.name) === 3 ? a.serial : undefined;
        this.queue.push({ from: n.info.name, to: a.to.name, message: { type: 'handoff', epoch: a.epoch, position: n.position, serial }, at: this.now + this.latency });
      }
    }
    for (const s of r.send) {
      // DECLINED only where the link runs at 3 (the shell drops it on a link at 2).
      if (s.message.type === 'declined') {
        if (this.linkVersion(n.info.name, s.to) !== 3) continue;
        this.declines.push({ from: n.info.name, to: s.to, serial: s.message.serial, reason: s.message.reason, at: this.now });
      }
      // Through the real codec: what a peer gets is what the wire carries.
      const message = s.message.type === 'heartbeat' ? (decodePeerMessage(encodePeerMessage(s.message).slice(0, -1), 3) as Heartbeat) : s.message;
      this.queue.push({ from: n.info.name, to: s.to, message, at: this.now + this.latency });
    }
  }

  /** The peer protocol a link from `from` to `to` negotiates. */
  linkVersion(from: string, to: string): 2 | 3 {
    return this.v2.has(from) || this.v2.has(to) ? 2 : 3;
  }

  /** Runs `f` on `name`'s machine and carries out what it returns (events a test injects directly). */
  on(name: string, f: (m: RoleMachine, now: { mono: number; wall: number }, facts: DataFacts) => Ready): void {
    const n = this.node(name);
    this.run(n, (m) => f(m, this.at(n), this.facts(n)));
  }

  run(n: SimNode, f: (m: RoleMachine) => Ready): void {
    if (!n.alive || n.paused) return;
    this.apply(n, f(n.machine));
  }

  /** Standbys that follow a reachable active receive its stream up to its position. */
  private replicate(): void {
    for (const n of this.nodes) {
      const leader = n.machine.leader;
      if (!n.alive || leader === undefined) continue;
      const a = this.node(leader.name);
      if (!a.alive || a.paused || a.machine.epoch !== n.machine.followedEpoch || this.cut.has(`${a.info.name}>${n.info.name}`) || this.cut.has(`${n.info.name}>${a.info.name}`)) continue;
      n.replica = { epoch: a.machine.epoch!, established: true, position: a.position, complete: true };
      a.confirmed.add(n.info.name);
    }
  }

  /** Delivers what is due, in order. */
  deliver(): void {
    const due = this.queue.filter((q) => q.at <= this.now);
    this.queue = this.queue.filter((q) => q.at > this.now);
    for (const q of due) {
      const to = this.node(q.to);
      if (!to.alive || this.cut.has(`${q.from}>${q.to}`)) continue;
      if (to.paused) {
        this.queue.push({ ...q, at: this.now + 1 });
        continue;
      }
      const m = q.message;
      const facts = this.facts(to);
      if (m.type === 'heartbeat') this.run(to, (x) => x.heartbeat(q.from, m, this.at(to), facts));
      else if (m.type === 'taken') this.run(to, (x) => x.taken(q.from, m.epoch, m.nextToken, this.at(to), facts));
      else if (m.type === 'handoff') this.run(to, (x) => x.handoff(q.from, m.epoch, m.position, m.serial, this.at(to), facts));
      else if (m.type === 'declined') this.run(to, (x) => x.declined(q.from, m.epoch, m.serial, m.reason, this.at(to), facts));
    }
    this.replicate();
  }

  /** Advances time by `ms` in steps of 10 ms: ticks every heartbeat interval, delivery in between. */
  advance(ms: number): void {
    for (let t = 0; t < ms; t += 10) {
      this.now += 10;
      for (const n of this.nodes) if (n.paused && n.monoStops) n.monoLag += 10;
      for (const n of this.nodes) {
        const woken = n.wakeAt !== undefined && n.wakeAt <= this.now;
        if (woken) n.wakeAt = undefined;
        if (this.now % HB === 0 || woken) this.run(n, (m) => m.tick(this.at(n), this.facts(n)));
      }
      this.deliver();
    }
  }

  /** Every node tells every other one it is up (links come up). */
  linkAll(): void {
    for (const n of this.nodes) for (const p of this.nodes) if (p !== n && p.alive && !this.cut.has(`${n.info.name}>${p.info.name}`)) this.run(n, (m) => m.link(p.info.name, 'outbound-up', this.at(n), this.facts(n)));
  }

  kill(name: string): void {
    const n = this.node(name);
    n.alive = false;
    this.queue = this.queue.filter((q) => q.to !== name && q.from !== name);
    // Its peers' dials are refused from now on.
    for (const p of this.nodes) if (p !== n) this.run(p, (m) => m.connectRefused(name, this.at(p), this.facts(p)));
  }

  restart(name: string, options: { wallOffset?: number; floor?: Token; previousMembers?: readonly string[] } = {}): SimNode {
    const old = this.node(name);
    const n = this.fresh(old.info, options.wallOffset ?? old.wallOffset, options.floor, options.previousMembers);
    this.nodes[this.nodes.indexOf(old)] = n;
    return n;
  }

  /** Grants (or any commands) on the active: its stream grows. */
  work(name: string, commands: number): void {
    this.node(name).position += commands;
    this.replicate();
  }

  actives(): SimNode[] {
    return this.nodes.filter((n) => n.alive && !n.paused && n.machine.role === 'active');
  }

  logs(name: string): string[] {
    return this.node(name).readies.flatMap((r) => r.log.map((l) => l.msg));
  }

  /** How `name` became active, each time: why, and from which table position (undefined: an empty table). */
  promotions(name: string): Array<{ why: string; position: number | undefined }> {
    return this.node(name)
      .readies.flatMap((r) => r.log)
      .filter((l) => l.msg === 'active: serving clients')
      .map((l) => ({ why: String(l.fields.why), position: l.fields.position as number | undefined }));
  }

  actions(name: string): string[] {
    return this.node(name).readies.flatMap((r) => r.actions.map((a) => a.type));
  }
}
