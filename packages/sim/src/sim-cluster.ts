/**
 * A small cluster on simulated machines, for scenario tests: start nodes,
 * run the scheduler until something holds, open raw client connections,
 * and read what each node says. The seeded runs (simulation.ts) build the
 * same machines; this is the hand-driven way to put one situation together
 * (a SIGTERM of the leader, a membership change under a partition) and look
 * at it, with the same safety checks after every event.
 */
import type { Operation } from '@ticketing/checker';
import { SimMachine, type MachineOptions } from './machine.js';
import { RaftInvariants } from './raft-invariants.js';
import { Scheduler } from './scheduler.js';
import { SimNetwork } from './sim-network.js';
import { WireConnection, type WireConnectionEvents } from './wire-client.js';

export interface SimClusterOptions {
  readonly seed: number;
  readonly names: readonly string[];
  readonly mode?: 'raft' | 'priority';
  /** Config keys for every node. */
  readonly flags?: Record<string, unknown>;
}

/** The timing the seeded runs use: many elections per simulated second. */
export const FAST_TIMING = { 'heartbeat-interval': 20, 'failover-timeout': 200 };

export class SimCluster {
  readonly sched: Scheduler;
  readonly net: SimNetwork;
  readonly machines: SimMachine[] = [];
  readonly history: Operation[] = [];
  private readonly invariants = new RaftInvariants();
  private readonly starts = new Map<string, number>();

  constructor(private readonly options: SimClusterOptions) {
    this.sched = new Scheduler(options.seed, 400);
    this.net = new SimNetwork(this.sched);
    for (const name of options.names) this.add(name, options.names);
  }

  /** A machine for `name` (not started), with `peers` as its --peers names. */
  add(name: string, peers: readonly string[], flags: Record<string, unknown> = {}): SimMachine {
    const opts: MachineOptions = { name, peers, mode: this.options.mode ?? 'raft', flags: { ...FAST_TIMING, ...this.options.flags, ...flags } };
    const m = new SimMachine(this.sched, this.net, opts, { rate: 1, wallOffsetMs: 0 });
    this.machines.push(m);
    return m;
  }

  machine(name: string): SimMachine {
    const m = this.machines.find((x) => x.name === name);
    if (m === undefined) throw new Error(`no machine ${name}`);
    return m;
  }

  startAll(): void {
    for (const m of this.machines) m.start();
  }

  /** The node that serves clients now (up, leader or active), if any. */
  leader(): SimMachine | undefined {
    return this.machines.find((m) => m.state === 'up' && (m.node?.role === 'leader' || m.node?.role === 'active'));
  }

  /** Runs events for `ms` simulated ms (or until `until` holds); the Raft safety checks run after every event. */
  async runFor(ms: number, until?: () => boolean): Promise<void> {
    await this.sched.run(this.sched.now + ms, () => this.check(), () => until?.() === true || this.sched.thrown !== undefined || this.sched.ownFailure !== undefined);
    if (this.sched.thrown !== undefined) throw this.sched.thrown;
    if (this.sched.ownFailure !== undefined) throw new Error(`a node's own failure: ${this.sched.ownFailure}`);
  }

  /** Runs until `cond` holds; throws when it does not within `ms`. */
  async waitFor(what: string, cond: () => boolean, ms = 10_000): Promise<void> {
    await this.runFor(ms, cond);
    if (!cond()) throw new Error(`${what}: not within ${ms} simulated ms\n${this.sched.recent.slice(-60).join('\n')}`);
  }

  /** Runs the simulation until `p` settles (it needs simulated time to); its value, or its error. */
  async settle<T>(p: Promise<T>, ms = 20_000): Promise<T> {
    let done = false;
    const watched = p.finally(() => (done = true));
    watched.catch(() => {});
    await this.runFor(ms, () => done);
    if (!done) throw new Error(`not settled within ${ms} simulated ms\n${this.sched.recent.slice(-60).join('\n')}`);
    return watched;
  }

  async waitForLeader(ms = 10_000): Promise<SimMachine> {
    await this.waitFor('a leader', () => this.leader() !== undefined, ms);
    return this.leader()!;
  }

  /** A raw protocol connection from host `client` to `m`'s client port. */
  connect(client: string, m: SimMachine, events: WireConnectionEvents = {}): WireConnection {
    return new WireConnection(this.sched, this.net, client, m.address, this.history, client, events);
  }

  private check(): void {
    const views = new Map();
    for (const m of this.machines) {
      if (this.starts.get(m.name) !== m.starts) {
        this.starts.set(m.name, m.starts);
        this.invariants.restarted(m.name);
      }
      const view = m.state === 'up' ? m.node?.raftLog() : undefined;
      if (view !== undefined) views.set(m.name, view);
    }
    if ((this.options.mode ?? 'raft') === 'raft') this.invariants.check(views);
  }
}
