/**
 * The fault injector: at random moments it breaks something, and later it
 * (or the "operator") repairs it. Kinds: network partitions (black holes and
 * resets, symmetric and one-way, one link, a whole node, or the nodes split
 * into two sides), process kills,
 * power losses, crashes right after the Nth next disk operation (between
 * the steps of a multi-step write), process pauses, clock rate changes and
 * wall-clock steps,
 * disk faults (short writes, ENOSPC, EIO, stalls), latent corruption of an old
 * sector, a wiped data directory (a replaced disk), and long idle stretches
 * (every clock jumps days ahead at once). Swarm runs add a
 * leader cut off from its peers while its clients still reach it.
 *
 * The fault model, as docs/raft.md states it: storage faults (corruption,
 * a wiped disk) hit at most a minority of nodes in one run, each while the
 * other nodes hold every committed entry; anything else may hit every node.
 */
import { DATA_DIR, type SimMachine } from './machine.js';
import type { Scheduler } from './scheduler.js';
import { noFaults, SECTOR } from './sim-fs.js';
import type { SimNetwork } from './sim-network.js';

export interface FaultOptions {
  /** Mean ms between faults. */
  readonly meanGapMs: number;
  /** No new fault after this (simulated ms). */
  readonly until: number;
  /** The fault kinds to inject (default: FAULT_KINDS). */
  readonly kinds?: readonly FaultKind[];
  /** Fault kinds to leave out (e.g. for a focused run). */
  readonly exclude?: readonly FaultKind[];
  /**
   * True when every node but `m` holds every committed entry on its disk.
   * Storage damage waits for that: Raft keeps committed data through the loss
   * of one disk only while the others hold it (a wiped node plus one that
   * never caught up are two failures, beyond what three nodes tolerate).
   */
  readonly othersHoldCommitted?: (m: SimMachine) => boolean;
  /** A pause is an OS suspend: the monotonic clock stops too (simulation.ts, osSuspend). */
  readonly osSuspend?: boolean;
  /**
   * Most a wall clock may be off real time after a step (ms). Raft uses wall
   * time only for its token floor, so steps of seconds are fair game; the
   * priority cluster's tokens assume clocks agree within failover-timeout
   * (docs/cluster.md), so its runs keep steps inside that.
   */
  readonly maxWallErrorMs?: number;
}

export const FAULT_KINDS = ['partition', 'isolate', 'split', 'kill', 'power-loss', 'pause', 'clock', 'disk-error', 'slow-disk', 'corrupt', 'misdirected-write', 'wipe', 'crash-point', 'long-idle'] as const;

/** A long idle stretch (see 'long-idle'): from ten minutes to 60 days, log-uniform. */
const IDLE_MIN_MS = 10 * 60_000;
const IDLE_MAX_MS = 60 * 86_400_000;
export type FaultKind = (typeof FAULT_KINDS)[number] | 'leader-cut';

export class FaultInjector {
  /** Machines whose storage was damaged in this run (at most a minority). */
  private readonly storageVictims = new Set<string>();
  private readonly repairing = new Set<string>();
  private readonly kinds: FaultKind[];
  readonly counts = new Map<FaultKind, number>();

  constructor(
    private readonly sched: Scheduler,
    private readonly net: SimNetwork,
    private readonly machines: readonly SimMachine[],
    private readonly options: FaultOptions,
  ) {
    this.kinds = (options.kinds ?? FAULT_KINDS).filter((k) => !(options.exclude ?? []).includes(k));
  }

  start(): void {
    this.schedule();
  }

  private schedule(): void {
    const gap = -Math.log(1 - this.sched.random()) * this.options.meanGapMs;
    if (this.sched.scenarioNow + gap > this.options.until || this.kinds.length === 0) return;
    this.sched.after(gap, 'fault', () => {
      this.repairRefused();
      this.inject(this.sched.pick(this.kinds));
      this.schedule();
    });
  }

  private get minority(): number {
    return Math.floor((this.targets.length - 1) / 2);
  }

  /** The machines faults may hit: every one but spares the operator has not added (or has removed). */
  private get targets(): SimMachine[] {
    return this.machines.filter((m) => !m.retired);
  }

  private later(minMs: number, maxMs: number, label: string, fn: () => void): void {
    this.sched.after(minMs + this.sched.random() * (maxMs - minMs), label, fn);
  }

  private restartLater(m: SimMachine, minMs = 50, maxMs = 1_500): void {
    this.later(minMs, maxMs, `operator: restart ${m.name}`, () => {
      this.repair(m);
    });
  }

  inject(kind: FaultKind): void {
    const s = this.sched;
    const machines = this.targets;
    const m = s.pick(machines);
    this.counts.set(kind, (this.counts.get(kind) ?? 0) + 1);
    switch (kind) {
      case 'partition': {
        const others = machines.filter((x) => x !== m);
        const other = s.pick(others);
        const how = s.chance(0.7) ? 'drop' : 'reset';
        const oneWay = s.chance(0.3);
        this.net.partition(m.name, other.name, how, oneWay);
        this.later(50, 1_500, 'heal link', () => this.net.heal(m.name, other.name));
        return;
      }
      case 'isolate': {
        // A node cut off from every other host, clients included.
        const hosts = [...machines.filter((x) => x !== m).map((x) => x.name), ...this.net.hostsSeen().filter((h) => !this.machines.some((x) => x.name === h))];
        for (const h of hosts) this.net.partition(m.name, h, 'drop');
        this.later(100, 2_000, `heal ${m.name}`, () => {
          for (const h of hosts) this.net.heal(m.name, h);
        });
        return;
      }
      case 'split': {
        // The nodes split into two sides that cannot hear each other (a switch between racks), their
        // clients still reaching every node: whichever side a learner, a paused node or a deposed
        // leader lands on, only a majority of voters may decide anything (a leader cut off from the
        // other voters but not from a learner must answer nothing from its table).
        const side = machines.filter(() => s.chance(0.5));
        if (side.length === 0 || side.length === machines.length) return;
        const other = machines.filter((x) => !side.includes(x));
        for (const a of side) for (const b of other) this.net.partition(a.name, b.name, 'drop');
        this.later(100, 2_000, `heal the split ${side.map((x) => x.name).join(',')} | ${other.map((x) => x.name).join(',')}`, () => {
          for (const a of side) for (const b of other) this.net.heal(a.name, b.name);
        });
        return;
      }
      case 'leader-cut': {
        // The leader (the active in priority mode) cut off from every other node while its clients
        // still reach it: it takes requests it cannot commit until it notices, and comes back with
        // a long uncommitted tail for the new leader to overwrite.
        const leader = machines.find((x) => x.state === 'up' && (x.node?.role === 'leader' || x.node?.role === 'active')) ?? m;
        const peers = machines.filter((x) => x !== leader);
        for (const p of peers) this.net.partition(leader.name, p.name, 'drop');
        this.later(100, 2_000, `heal ${leader.name} with its peers`, () => {
          for (const p of peers) this.net.heal(leader.name, p.name);
        });
        return;
      }
      case 'kill':
        if (m.state === 'down' || m.state === 'refused') return;
        m.kill();
        this.restartLater(m);
        return;
      case 'power-loss':
        if (m.state === 'refused') return;
        m.powerLoss();
        this.restartLater(m);
        return;
      case 'crash-point': {
        // A kill or power loss right after one of the next few disk operations, between the steps
        // of whatever the node is writing.
        const proc = m.proc;
        if (proc === undefined) return;
        const powerLoss = s.chance(0.5);
        const remaining = s.int(1, 12);
        // A power loss may also come while the operation is under way: its write is torn.
        const during = powerLoss && s.chance(0.5);
        proc.crashAfterDiskOps(remaining, () => {
          if (m.proc !== proc) return;
          if (powerLoss) m.powerLoss();
          else m.kill();
          this.restartLater(m);
        }, during);
        return;
      }
      case 'pause': {
        if (m.proc === undefined) return;
        // As SIGSTOP does: the monotonic clock runs on, and the node wakes up to the time gone by.
        // An OS suspend stops it too: only the wall clock tells the node time went by.
        m.clock.pause(this.options.osSuspend !== true);
        this.net.pauseHost(m.name);
        this.later(20, 600, `resume ${m.name}`, () => {
          m.clock.resume();
          this.net.resumeHost(m.name);
        });
        return;
      }
      case 'long-idle':
        // Every clock jumps ahead at once (scheduler.ts, warp): a cluster that ran uneventfully for
        // days, or whose hosts were suspended together. A node's work that grows with the time gone
        // by, instead of with the work to do, shows as a stall (issue 27, D-3: the timer wheel of a
        // node that had followed for a month took 539 ms to catch up when it took over).
        s.warp(Math.exp(Math.log(IDLE_MIN_MS) + s.random() * Math.log(IDLE_MAX_MS / IDLE_MIN_MS)));
        return;
      case 'clock':
        if (s.chance(0.5)) m.clock.setRate(0.99 + s.random() * 0.02);
        else {
          const max = this.options.maxWallErrorMs ?? Infinity;
          const step = s.int(-2_000, 2_000);
          const target = Math.max(-max, Math.min(max, m.clock.wallErrorMs + step));
          m.clock.stepWall(target - m.clock.wallErrorMs);
        }
        return;
      case 'disk-error': {
        const kinds = ['shortWrite', 'enospc', 'eioWrite', 'eioSync', 'eioOpen', 'eioRename', 'eioSyncDir'] as const;
        const which = s.pick(kinds);
        m.fs.faults[which]++;
        s.note(`${m.name}: disk fault armed (${which})`);
        this.restartLater(m, 500, 2_500);
        return;
      }
      case 'misdirected-write': {
        // Firmware that writes a few sectors off and reports success: damage, like a corrupt sector.
        if (!this.mayDamage(m)) return;
        m.fs.faults.misdirect++;
        s.note(`${m.name}: its next write goes a few sectors off`);
        return;
      }
      case 'slow-disk': {
        // A disk that stalls (a saturated or throttled volume): fsyncs take tens to hundreds of ms,
        // longer than a round trip to the peers, so a node's acks race its own writes.
        m.diskSlowdown = s.int(10, 150);
        s.note(`${m.name}: disk ${m.diskSlowdown} times slower`);
        this.later(100, 2_000, `${m.name}: disk back to speed`, () => {
          m.diskSlowdown = 1;
        });
        return;
      }
      case 'corrupt': {
        if (!this.mayDamage(m)) return;
        const files = m.fs.filesUnder(`${DATA_DIR}/raft`).filter((f) => f.size > 2 * SECTOR);
        if (files.length === 0) return;
        const file = s.pick(files);
        // An old record: anywhere but the last sector (a torn tail is a different, legal case).
        const offset = s.int(0, file.size - SECTOR - 1);
        s.note(`${m.name}: latent sector error in ${file.path} at byte ${offset}`);
        m.fs.corruptSector(file.path, offset, s.random);
        return;
      }
      case 'wipe':
        if (!this.mayDamage(m)) return;
        m.wipe();
        this.restartLater(m, 200, 2_000);
        return;
    }
  }

  /** A node that refused to start (damaged storage) gets a new disk from the operator, a while later. */
  private repairRefused(): void {
    for (const m of this.machines) {
      if (m.state !== 'refused' || this.repairing.has(m.name)) continue;
      this.repairing.add(m.name);
      this.later(200, 1_500, `operator: look at ${m.name}`, () => {
        this.repairing.delete(m.name);
        this.repair(m);
      });
    }
  }

  /**
   * What an operator does with a node that is down: start it again; if it
   * refused to start because its storage is damaged, replace its disk (an
   * empty data directory that rejoins) first.
   */
  private repair(m: SimMachine): void {
    if (m.retired) return; // not a member: nothing to bring back
    if (m.state === 'refused') {
      if (m.corrupt) {
        if (!this.storageVictims.has(m.name)) throw new Error(`${m.name} reports damaged storage, but no storage fault was injected on it`);
        m.wipe();
      } else m.state = 'down';
    }
    if (m.state === 'down') m.start();
  }

  /** Nodes whose storage this run damaged or wiped (they may have lost what they held). */
  get damagedNodes(): number {
    return this.storageVictims.size;
  }

  isDamaged(m: SimMachine): boolean {
    return this.storageVictims.has(m.name);
  }

  private mayDamage(m: SimMachine): boolean {
    if (this.options.othersHoldCommitted?.(m) === false) return false;
    if (this.storageVictims.has(m.name)) return true;
    if (this.storageVictims.size >= this.minority) return false;
    this.storageVictims.add(m.name);
    return true;
  }

  /**
   * The operator's repairs at the end of a run: every link healed, every
   * process resumed and started, and a node that refuses to start (its
   * storage is damaged) replaced by an empty one that rejoins.
   */
  repairAll(): void {
    this.net.heal();
    for (const m of this.machines) {
      m.clock.resume();
      this.net.resumeHost(m.name);
      // The failing disk is fixed: no armed I/O error is left to fire.
      Object.assign(m.fs.faults, noFaults());
      m.diskSlowdown = 1;
      if (m.state === 'up' && m.proc === undefined) m.state = 'down';
      this.repair(m);
    }
  }
}
