/**
 * The operator, at random moments, beside the faults: Raft membership
 * changes (a spare machine added as a learner, promoted, removed again, as
 * `ticketing member` does through the admin API), leadership transfers,
 * graceful restarts (SIGTERM, then start), configuration reloads
 * (SIGHUP), and rolling upgrades (one node at a time restarted on this
 * release, from one standing in for the previous: machine.ts). Each goes through the same node API the admin listener and the
 * CLI use. A refusal (not the leader, a change under way, a learner still
 * behind) is an answer, not a failure; anything else a node throws is.
 */
import { MembershipRefused, type ServerConfig } from '@ticketing/server';
import type { SimMachine } from './machine.js';
import type { Scheduler } from './scheduler.js';
import { SimFs } from './sim-fs.js';

export const OPERATOR_ACTIONS = ['member-change', 'transfer', 'graceful-restart', 'reload', 'upgrade'] as const;

/** What a node of the previous release speaks (0.1.0: peer protocol 2 only). */
export const PREVIOUS_RELEASE_PROTOCOLS: readonly number[] = [2];
export type OperatorAction = (typeof OPERATOR_ACTIONS)[number];

/** Where a spare stands in its cycle: outside the cluster, a learner, a voter. */
type Stage = 'out' | 'learner' | 'voter';

export interface OperatorOptions {
  readonly meanGapMs: number;
  readonly until: number;
  readonly actions: readonly OperatorAction[];
}

export class Operator {
  private readonly stage = new Map<SimMachine, Stage>();
  /** A change is being asked for (one at a time, as an operator would). */
  private busy = false;
  readonly counts = new Map<OperatorAction, number>();

  constructor(
    private readonly sched: Scheduler,
    /** The machines that start in the cluster. */
    private readonly members: readonly SimMachine[],
    /** Machines that are not members until the operator adds them. */
    private readonly spares: readonly SimMachine[],
    private readonly options: OperatorOptions,
  ) {
    for (const s of spares) {
      this.stage.set(s, 'out');
      s.retired = true;
    }
  }

  start(): void {
    if (this.options.actions.length > 0) this.schedule();
  }

  private schedule(): void {
    const gap = -Math.log(1 - this.sched.random()) * this.options.meanGapMs;
    if (this.sched.scenarioNow + gap > this.options.until) return;
    this.sched.after(gap, 'operator', () => {
      this.act(this.sched.pick(this.options.actions));
      this.schedule();
    });
  }

  /** The node that leads now, if one does (and is up). */
  private leader(): SimMachine | undefined {
    return [...this.members, ...this.spares].find((m) => m.state === 'up' && m.node?.role === 'leader');
  }

  /** Every machine that is a member now (the spares while added). */
  private get current(): SimMachine[] {
    return [...this.members, ...this.spares.filter((s) => this.stage.get(s) !== 'out')];
  }

  act(action: OperatorAction): void {
    this.counts.set(action, (this.counts.get(action) ?? 0) + 1);
    switch (action) {
      case 'member-change':
        return this.memberChange();
      case 'transfer': {
        const leader = this.leader();
        if (leader === undefined) return;
        this.sched.note(`operator: member transfer (from ${leader.name})`);
        this.ask(leader.node!.membership()!.transfer(undefined, 2_000));
        return;
      }
      case 'graceful-restart': {
        const m = this.sched.pick(this.current.filter((x) => x.state === 'up' && x.node !== undefined));
        if (m === undefined) return;
        this.sched.note(`operator: SIGTERM ${m.name}, start it again once it has exited`);
        m.gracefulRestart(this.sched.random() * 1_300);
        return;
      }
      case 'upgrade': {
        // A rolling upgrade: the next node still on the previous release is stopped (SIGTERM) and
        // started on this one, in whatever state the cluster is; once all are, now and then one
        // is rolled back (a downgrade the release notes allow), and upgraded again later.
        const up = this.current.filter((x) => x.state === 'up' && x.node !== undefined);
        const old = up.filter((x) => x.peerProtocols !== undefined);
        const m = old.length > 0 ? this.sched.pick(old) : this.upgrading && this.sched.chance(0.2) ? this.sched.pick(up) : undefined;
        if (m === undefined) return;
        m.peerProtocols = m.peerProtocols === undefined ? PREVIOUS_RELEASE_PROTOCOLS : undefined;
        this.sched.note(`operator: ${m.peerProtocols === undefined ? 'upgrade' : 'roll back'} ${m.name}: SIGTERM, then start it on ${m.peerProtocols === undefined ? 'this release' : 'the previous release'}`);
        m.gracefulRestart(this.sched.random() * 500);
        return;
      }
      case 'reload': {
        const m = this.sched.pick(this.current.filter((x) => x.state === 'up' && x.node !== undefined));
        if (m === undefined) return;
        // SIGHUP with a limit changed: a waiter limit the workload meets now and then.
        const next: ServerConfig = { ...m.config(), 'max-waiters-per-key': this.sched.pick([2, 8, 10_000]) };
        this.sched.note(`operator: SIGHUP ${m.name} (max-waiters-per-key ${next['max-waiters-per-key']})`);
        m.node!.reload(next);
        return;
      }
    }
  }

  /** The next step of a spare's cycle: add it (and start it on an empty disk), promote it, remove it (and stop it). */
  private memberChange(): void {
    const leader = this.leader();
    const spare = this.spares.length === 0 ? undefined : this.sched.pick(this.spares);
    if (leader === undefined || spare === undefined || this.busy) return;
    const control = leader.node!.membership()!;
    const stage = this.stage.get(spare)!;
    const name = spare.nodeName;
    if (stage === 'out') {
      this.sched.note(`operator: member add ${name}`);
      this.ask(control.change({ op: 'add', name, address: spare.address }, 3_000), () => {
        this.stage.set(spare, 'learner');
        spare.fs = new SimFs(); // a new machine's empty disk
        spare.retired = false;
        spare.options = { ...spare.options, peers: this.current.map((m) => m.nodeName) };
        spare.start();
      });
    } else if (stage === 'learner') {
      this.sched.note(`operator: member promote ${name}`);
      this.ask(control.change({ op: 'promote', name }, 3_000), () => this.stage.set(spare, 'voter'));
    } else {
      if (leader === spare) return; // the leader cannot remove itself: a transfer comes first
      this.sched.note(`operator: member remove ${name}`);
      this.ask(control.change({ op: 'remove', name }, 3_000), () => {
        this.stage.set(spare, 'out');
        spare.retired = true;
        if (spare.node !== undefined) void spare.node.shutdown();
        else spare.kill();
      });
    }
  }

  /** Waits for a request's answer: done runs on success; a refusal is fine; anything else is the node's own failure. */
  private ask(p: Promise<unknown>, done: () => void = () => {}): void {
    this.busy = true;
    p.then(
      () => {
        this.busy = false;
        done();
      },
      (err: unknown) => {
        this.busy = false;
        if (err instanceof MembershipRefused) this.sched.note(`operator: refused: ${err.message}`);
        else this.sched.failedItself(`the membership API threw: ${(err as Error).stack ?? String(err)}`);
      },
    );
  }

  /** The run started on the previous release (simulation.ts): upgrades (and roll-backs) have something to do. */
  upgrading = false;

  /** Machines that are members now. */
  get memberMachines(): readonly SimMachine[] {
    return this.current;
  }
}
