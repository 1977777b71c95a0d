/**
 * What happens to a priority cluster beyond the shared fault injector
 * (faults.ts), as issue 26 found it in real operations:
 *
 * - a pause (SIGSTOP, a long GC, a frozen VM) long enough for the others to
 *   promote, the monotonic clock running meanwhile as it does for a real
 *   process, then a resume; with `--os-suspend`, an OS suspend instead: the
 *   monotonic clock stops too and only the wall clock shows the time gone;
 * - a crash-restart of the active inside the standbys' hold (back before
 *   they decided anything);
 * - an operator's mistake: a node restarted with another peers list (an
 *   added or a removed member, another order) or another peer token, fixed
 *   a while later;
 * - a wall clock stepped beyond the bound the tokens allow, then put right
 *   by NTP (the property there is "refuses", not "serves");
 * - a graceful stop (SIGTERM: the hand-off) and a start again;
 * - once in a while, the operator moving every data directory to Raft mode
 *   (the cluster is stopped and started in Raft mode on the same disks);
 * - in calm runs only, issue 26's defect 7 as operators met it: a standby
 *   restarted with a mistake, which the operator then takes out, and the
 *   active's machine gone for seconds soon after: the last node must take
 *   over by itself (a refusal mark must not outlive the node that refused);
 *   or, in calm runs that do not play that one, issue 26's defect 1 as it was
 *   met: a standby's disk replaced (no record of the members it served with)
 *   and the node started with a peers list that adds a member, another
 *   cluster identity, for seconds while the active serves and clients reach
 *   it: refused by its peers, it must never promote beside them.
 *
 * The operator's repairs at the end put every configuration and clock right.
 */
import type { SimMachine } from './machine.js';
import type { Scheduler } from './scheduler.js';
import type { SimNetwork } from './sim-network.js';

export const PRIORITY_FAULT_KINDS = ['pause-resume', 'fast-restart', 'misconfigure', 'clock-beyond', 'graceful-restart', 'switch-to-raft'] as const;
/** Scenarios only calm runs play (in the default mix they would replay no earlier seed). */
export const CALM_ONLY_PRIORITY_FAULT_KINDS = ['mistake-then-outage', 'new-disk-added-member'] as const;
export type PriorityFaultKind = (typeof PRIORITY_FAULT_KINDS)[number] | (typeof CALM_ONLY_PRIORITY_FAULT_KINDS)[number];

export interface PriorityFaultOptions {
  readonly meanGapMs: number;
  readonly until: number;
  readonly failoverTimeoutMs: number;
  /** The clock bound the nodes assume (half the failover timeout). */
  readonly clockBoundMs: number;
  /** Wall-clock error the shared injector keeps clocks within (what NTP gives back). */
  readonly normalWallErrorMs: number;
  readonly kinds?: readonly PriorityFaultKind[];
  /** A calm run (`--fault-gap` above the default): its own scenarios too (CALM_ONLY_PRIORITY_FAULT_KINDS). */
  readonly calm?: boolean;
  /** A pause is an OS suspend: the monotonic clock stops too (simulation.ts, osSuspend). */
  readonly osSuspend?: boolean;
}

/** A peer token none of the nodes has: a 256-bit secret. */
const WRONG_TOKEN = '9b1d4e7a2c5f80361e9a7d3b5c2f4e6a8d0b1c3e5f7a9b2d4c6e8f0a1b3c5d7e';

export class PriorityFaults {
  readonly counts = new Map<PriorityFaultKind, number>();
  /** Machines running now with a configuration the others do not share. */
  readonly misconfigured = new Set<string>();

  /** The cluster runs in Raft mode since this time (undefined: still priority). */
  switchedAt: number | undefined;
  private readonly kinds: readonly PriorityFaultKind[];
  private switchDone = false;

  constructor(
    private readonly sched: Scheduler,
    private readonly net: SimNetwork,
    private readonly machines: readonly SimMachine[],
    private readonly o: PriorityFaultOptions,
  ) {
    // The mode switch is rare: one seed in about eight draws it at all.
    this.kinds = (o.kinds ?? PRIORITY_FAULT_KINDS).filter((k) => k !== 'switch-to-raft' || sched.chance(0.125));
  }

  start(): void {
    this.schedule();
    // A calm run's scenarios (above) need a whole cluster and seconds to play out: one of them tried once, early.
    // One draw decides both (a seed that played neither before draws nothing more, and replays as before).
    const roll = this.o.calm === true ? this.sched.random() : 1;
    if (roll < 0.6) {
      this.later(this.o.until / 16, this.o.until / 4, 'priority fault: mistake, then outage', () => this.inject('mistake-then-outage'));
    } else if (roll < 0.85) {
      this.later(this.o.until / 16, this.o.until / 4, 'priority fault: a new disk, and an added member', () => this.inject('new-disk-added-member'));
    }
  }

  private schedule(): void {
    const gap = -Math.log(1 - this.sched.random()) * this.o.meanGapMs;
    if (this.sched.scenarioNow + gap > this.o.until || this.kinds.length === 0) return;
    this.sched.after(gap, 'priority fault', () => {
      if (this.switchedAt === undefined) this.inject(this.sched.pick(this.kinds));
      this.schedule();
    });
  }

  private later(minMs: number, maxMs: number, label: string, fn: () => void): void {
    this.sched.after(minMs + this.sched.random() * (maxMs - minMs), label, fn);
  }

  /** The active if one is up, else any machine. */
  private activeOrAny(): SimMachine {
    const s = this.sched;
    const active = this.machines.find((m) => m.state === 'up' && m.node?.role === 'active');
    return active !== undefined && s.chance(0.7) ? active : s.pick(this.machines);
  }

  inject(kind: PriorityFaultKind): void {
    const s = this.sched;
    const T = this.o.failoverTimeoutMs;
    this.counts.set(kind, (this.counts.get(kind) ?? 0) + 1);
    switch (kind) {
      case 'pause-resume': {
        const m = this.activeOrAny();
        if (m.proc === undefined || m.clock.isPaused) return;
        const suspend = this.o.osSuspend === true;
        m.clock.pause(!suspend);
        this.net.pauseHost(m.name);
        s.note(suspend ? `${m.name}: suspended (OS suspend), its monotonic clock stopped, its wall clock running` : `${m.name}: stopped (SIGSTOP), its monotonic clock running`);
        this.later(T / 2, 3 * T, `resume ${m.name}`, () => {
          m.clock.resume();
          this.net.resumeHost(m.name);
        });
        return;
      }
      case 'fast-restart': {
        const m = this.activeOrAny();
        if (m.state !== 'up') return;
        m.kill();
        // Back inside the hold: before the standbys have waited out their clock budget.
        this.later(5, 0.75 * T, `operator: restart ${m.name} at once`, () => {
          if (m.state === 'down') m.start();
        });
        return;
      }
      case 'misconfigure': {
        const m = s.pick(this.machines);
        if (m.state !== 'up' || this.misconfigured.has(m.name)) return;
        m.overrides = this.mistake(m);
        s.note(`${m.name}: restarted by the operator with a mistake: ${JSON.stringify(m.overrides)}`);
        this.misconfigured.add(m.name);
        m.kill();
        m.start();
        this.later(300, 3_000, `operator: fix ${m.name}'s configuration`, () => {
          this.fix(m);
        });
        return;
      }
      case 'clock-beyond': {
        const m = s.pick(this.machines);
        const bound = this.o.clockBoundMs;
        const size = bound * (1.2 + s.random() * 20);
        m.clock.stepWall((s.chance(0.5) ? 1 : -1) * size);
        this.later(300, 3_000, `ntp: put ${m.name}'s clock right`, () => this.ntp(m));
        return;
      }
      case 'graceful-restart': {
        const m = this.activeOrAny();
        if (m.state !== 'up' || m.node === undefined) return;
        s.note(`${m.name}: SIGTERM (graceful stop, hand-off), started again once it has exited`);
        m.gracefulRestart(s.random() * 1_300);
        return;
      }
      case 'mistake-then-outage': {
        const active = this.machines.find((m) => m.state === 'up' && m.node?.role === 'active');
        // From a whole cluster, so one correct node is left to take over.
        if (active === undefined || this.machines.length < 3 || this.machines.some((m) => m.state !== 'up' || this.misconfigured.has(m.name))) return;
        const standby = this.sched.pick(this.machines.filter((m) => m !== active));
        standby.overrides = this.mistake(standby);
        s.note(`${standby.name}: restarted by the operator with a mistake: ${JSON.stringify(standby.overrides)}; taken out later, then ${active.name}'s machine goes`);
        this.misconfigured.add(standby.name);
        standby.kill();
        standby.start();
        this.later(300, 1_500, `operator: take ${standby.name} out`, () => {
          this.fix(standby, false);
          this.later(0, T, `${active.name}: its machine is gone (power) for seconds`, () => {
            if (active.state !== 'up') return;
            active.kill();
            this.later(8 * T, 12 * T, `operator: ${active.name}'s machine is back`, () => {
              if (active.state === 'down') active.start();
            });
          });
        });
        return;
      }
      case 'new-disk-added-member': {
        const active = this.machines.find((m) => m.state === 'up' && m.node?.role === 'active');
        if (active === undefined || this.machines.some((m) => m.state !== 'up' || this.misconfigured.has(m.name))) return;
        const standby = this.sched.pick(this.machines.filter((m) => m !== active));
        // No record of the members it served with: only its peers' refusals keep it out.
        standby.wipe();
        standby.overrides = { peers: standby.options.peers.map((p) => `${p}=${p}:5225`).concat('n9=n9:5225').join(',') };
        s.note(`${standby.name}: its disk replaced, started by the operator with a member added to its peers list only: ${JSON.stringify(standby.overrides)}`);
        this.misconfigured.add(standby.name);
        standby.start();
        // Longer than two actives may coexist (two failover timeouts once links are up).
        this.later(12 * T, 20 * T, `operator: fix ${standby.name}'s configuration`, () => this.fix(standby));
        return;
      }
      case 'switch-to-raft': {
        if (this.switchDone || this.sched.scenarioNow < this.o.until / 3) return;
        this.switchDone = true;
        this.switchedAt = this.sched.now;
        s.note('operator: stops the whole cluster and starts it again in Raft mode, on the same data directories');
        for (const m of this.machines) {
          if (m.state === 'up' || m.state === 'starting') m.kill();
          this.misconfigured.delete(m.name);
          m.overrides = { mode: 'raft' };
        }
        this.later(50, 500, 'operator: start the Raft cluster', () => {
          for (const m of this.machines) if (m.state !== 'up' && m.state !== 'starting') m.start();
        });
        return;
      }
    }
  }

  /** A configuration this node does not share with the others. */
  private mistake(m: SimMachine): Record<string, unknown> {
    const names = m.options.peers;
    const as = (list: readonly string[]) => list.map((p) => `${p}=${p}:5225`).join(',');
    const others = names.filter((n) => n !== m.name);
    const choices: Array<Record<string, unknown>> = [
      { peers: as([...names].reverse()) }, // another order (another priority, maybe another token residue)
      { peers: as([...names, 'n9']) }, // a member added here only
      { 'peer-token': WRONG_TOKEN }, // a rotation done on one node only, or a typo
      // The new member first in its own list: the other nodes' residue 0.
      { peers: as([m.name, ...others]) },
    ];
    // A member removed here only (sync-standbys kept valid for the shorter list: the mistake is the list).
    if (others.length >= 2) choices.push({ peers: as(names.filter((n) => n !== this.sched.pick(others))), 'sync-standbys': 0 });
    const pick = this.sched.pick(choices);
    // The same list as everyone's is no mistake: take the next one.
    return pick.peers === as(names) ? choices[0]! : pick;
  }

  /** The operator fixes the node's configuration; now and then it takes the node out instead, until the end. */
  private fix(m: SimMachine, restart = !this.sched.chance(0.4)): void {
    if (!this.misconfigured.delete(m.name)) return;
    m.overrides = this.switchedAt === undefined ? {} : { mode: 'raft' };
    this.sched.note(`${m.name}: the operator ${restart ? 'fixes its configuration and restarts it' : 'stops it (fixed, it is started again at the end)'}`);
    if (m.state === 'up' || m.state === 'starting') m.kill();
    if (restart && m.state !== 'refused') m.start();
  }

  /** NTP steps the clock back to within its usual error. */
  private ntp(m: SimMachine): void {
    const normal = this.o.normalWallErrorMs;
    const target = (this.sched.random() * 2 - 1) * normal;
    if (Math.abs(m.clock.wallErrorMs) <= normal) return;
    m.clock.stepWall(target - m.clock.wallErrorMs);
  }

  /** Largest wall-clock error of any machine now (ms). */
  get largestWallErrorMs(): number {
    return Math.max(...this.machines.map((m) => Math.abs(m.clock.wallErrorMs)));
  }

  /** The operator's repairs at the end: every configuration and clock put right (the shared injector restarts). */
  repairAll(): void {
    for (const m of this.machines) {
      this.fix(m, true);
      this.ntp(m);
    }
  }
}
