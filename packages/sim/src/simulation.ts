/**
 * One seed of the whole-node simulation: real TicketingNodes (engine,
 * sessions, Raft runtime, storage) on simulated machines, clients that
 * record a history, a fault injector, safety checks after every event, then
 * repairs, a liveness check, and the linearizability check of the history.
 * The same seed replays the same run, event for event.
 */
import { check, formatVerdict, type Operation, type Verdict } from '@ticketing/checker';
import { RaftStorage, tokenWallMs, type RaftLogView } from '@ticketing/server';
import { backupViolation } from './backup-checks.js';
import { DATA_DIR, SIM_CLIENT_IDENTITIES, SIM_CLIENT_TOKENS } from './machine.js';
import { readOnlyDisk, type SimFs } from './sim-fs.js';
import { FaultInjector, type FaultKind } from './faults.js';
import { findOverlap, tokenViolation, type Grant, type Hold } from './client-checks.js';
import { simulateClientClock } from './library-client.js';
import { SimMachine } from './machine.js';
import { RaftInvariants, SafetyViolation, type DurableLog } from './raft-invariants.js';
import { Scheduler } from './scheduler.js';
import { SIM_EPOCH_MS } from './sim-clock.js';
import { describeSwarmProfile, drawSwarmProfile } from './swarm.js';
import { Operator, OPERATOR_ACTIONS, PREVIOUS_RELEASE_PROTOCOLS, type OperatorAction } from './operator.js';
import { SimNetwork } from './sim-network.js';
import { WireConnection } from './wire-client.js';
import { Workload } from './workload.js';
import { PriorityChecks, RELINK_MS } from './priority-checks.js';
import { PriorityFaults } from './priority-faults.js';

export interface SimulationOptions {
  readonly seed: number;
  readonly nodes: number;
  /**
   * Raft: every check. Priority: no majority and no log, so no Raft
   * invariants, and acknowledged grants may be lost in a failover (two actives
   * may even coexist briefly, docs/cluster.md): the fencing promise (tokens),
   * liveness and a process that never throws are what is checked.
   */
  readonly mode: 'raft' | 'priority';
  /** Simulated ms of client load and faults. */
  readonly durationMs: number;
  readonly clients: number;
  /** Clients that pipeline many acquires of their own keys on one connection. */
  readonly pipeliningClients: number;
  /** Clients that use the official TypeScript library (on simulated time and network). */
  readonly libraryClients: number;
  readonly keys: number;
  readonly faultGapMs: number;
  readonly excludeFaults?: readonly FaultKind[];
  /** How late a lease may end in the history check (see docs/raft.md). */
  readonly slackMs: number;
  /** Events kept for the trace of a failure. */
  readonly traceLength?: number;
  /** Swarm testing: the seed draws its own fault kinds, load and snapshot spacing (swarm.ts). */
  readonly swarm?: boolean;
  /**
   * Pauses are OS suspends (`--os-suspend`): the monotonic clock stops with the process, the wall
   * clock runs on, as CLOCK_MONOTONIC does through a suspend to RAM or a suspended VM on Linux. Off,
   * a pause is a SIGSTOP (the monotonic clock runs). An option, not a new fault kind, so every seed
   * without it replays as before.
   */
  readonly osSuspend?: boolean;
  /** The operator's actions (default: all in Raft mode; restarts and reloads in priority mode). */
  readonly operatorActions?: readonly OperatorAction[];
  /**
   * The history check's budget, in search steps per key (not wall time, so a seed's verdict
   * does not depend on the machine). A key that needs more fails the seed as inconclusive.
   */
  readonly checkSteps?: number;
}

/** Default budget of the history check: far above what seeds need (docs/verify.md), far below a hang. */
export const DEFAULT_CHECK_STEPS = 2_000_000;

export const DEFAULT_OPTIONS: Omit<SimulationOptions, 'seed'> = {
  nodes: 3,
  mode: 'raft',
  durationMs: 4_000,
  clients: 4,
  pipeliningClients: 1,
  libraryClients: 2,
  keys: 4,
  faultGapMs: 300,
  // Lease deadlines are per node and monotonic (docs/raft.md): a node that restarts, or installs
  // a snapshot, gives the locks it recovers a full lease from then. So a lock may outlive its lease
  // by up to one more lease (3 s at most here) plus the time to elect and apply.
  slackMs: 4_000,
};

export interface SimulationResult {
  readonly seed: number;
  readonly ok: boolean;
  /** What failed: a safety property, liveness, or the history check. */
  readonly failure: string | undefined;
  /** The last events before the end (or the failure). */
  readonly trace: readonly string[];
  readonly events: number;
  readonly simulatedMs: number;
  readonly operations: number;
  readonly faults: ReadonlyMap<FaultKind, number>;
  /** Every client operation, for a closer look at a failing seed. */
  readonly history: readonly Operation[];
  /** A swarm seed's profile (what it drew), for the report. */
  readonly profile: string | undefined;
  /** Rare paths the nodes reached, with how often (coverage counters). */
  readonly coverage: ReadonlyMap<string, number>;
  /** Search steps the history check took (0 when it did not run). */
  readonly checkSteps: number;
  /** The event that kept a node's CPU busy longest (the CPU cost model: scheduler.ts). */
  readonly longestTask: { readonly host: string; readonly ms: number; readonly label: string } | undefined;
}

const durableLogs = new WeakMap<SimFs, { version: number; log: DurableLog }>();

/** What every power loss would leave on `fs`, read with the real recovery code (cached until the disk's durable state changes). */
function durableLog(fs: SimFs): DurableLog {
  const cached = durableLogs.get(fs);
  if (cached !== undefined && cached.version === fs.durableVersion) return cached.log;
  const logs = fs.durableCopies().map(recoveredLog);
  const log: DurableLog = logs.length === 1 ? logs[0]! : { has: (index, term) => logs.every((l) => l.has(index, term)), through: Math.min(...logs.map((l) => l.through)) };
  durableLogs.set(fs, { version: fs.durableVersion, log });
  return log;
}

function recoveredLog(copy: SimFs): DurableLog {
  const disk = readOnlyDisk(copy);
  let recovered: ReturnType<typeof RaftStorage.inspect> | undefined;
  try {
    if (copy.exists(`${DATA_DIR}/raft`)) recovered = RaftStorage.inspect(disk, DATA_DIR);
  } catch {
    recovered = undefined; // damaged: it counts as holding nothing (the injector counts it as damaged)
  }
  if (recovered === undefined) return { has: () => false, through: 0 };
  const { snapshot, entries } = recovered.state;
  return { has: (index, term) => index <= snapshot.index || entries[index - snapshot.index - 1]?.term === term, through: snapshot.index };
}

/** The nodes' failover-timeout (ms): short, so a 4 s run sees many elections and failovers. */
const FAILOVER_TIMEOUT_MS = 200;
/** The clock bound priority nodes assume: half the failover timeout. */
const CLOCK_BOUND_MS = FAILOVER_TIMEOUT_MS / 2;

/** Time spans [start, end], the last one open (end Infinity) while its condition holds. */
type Spans = Array<[number, number]>;

function markSpan(spans: Spans, holds: boolean, now: number): void {
  const open = spans.at(-1);
  if (holds && (open === undefined || open[1] !== Infinity)) spans.push([now, Infinity]);
  if (!holds && open !== undefined && open[1] === Infinity) open[1] = now;
}

function overlaps(spans: Spans, from: number, to: number): boolean {
  return spans.some(([a, b]) => a <= to && b >= from);
}

/**
 * Priority mode: how far each wall clock may be off real time, so that two
 * nodes' clocks agree within what the hybrid-clock tokens assume
 * (docs/cluster.md): half the failover-timeout the simulation gives them.
 */
const PRIORITY_WALL_ERROR_MS = FAILOVER_TIMEOUT_MS / 4;

/** How long the cluster has, after every repair, to grant one new acquire. */
const LIVENESS_MS = 15_000;

/** A seed's settings: the options as given, or, for a swarm seed, what it drew (swarm.ts). */
function runSettings(
  sched: Scheduler,
  options: SimulationOptions,
): { o: SimulationOptions; snapshotEntries: number; faultKinds?: readonly FaultKind[]; profile?: string } {
  // Short logs between snapshots exercise InstallSnapshot and compaction; long ones, damage in the middle of a WAL.
  const snapshotEntries = sched.pick([20, 50, 200]);
  if (options.swarm !== true) return { o: options, snapshotEntries };
  const p = drawSwarmProfile(sched);
  const { faultGapMs, clients, pipeliningClients, libraryClients, keys, operatorActions } = p;
  return {
    o: { ...options, faultGapMs, clients, pipeliningClients, libraryClients, keys, operatorActions },
    snapshotEntries: p.snapshotEntries,
    faultKinds: p.faultKinds,
    profile: describeSwarmProfile(p),
  };
}

/** The operator's actions a run gets: membership and transfers are Raft's; restarts and reloads both modes'. */
function operatorActions(o: SimulationOptions): readonly OperatorAction[] {
  const all = o.operatorActions ?? OPERATOR_ACTIONS;
  return o.mode === 'raft' ? all : all.filter((a) => a === 'graceful-restart' || a === 'reload' || a === 'upgrade');
}

/** Mean ms between two operator actions: rarer than faults. */
const OPERATOR_GAP_MS = 700;

export async function simulate(options: SimulationOptions): Promise<SimulationResult> {
  const sched = new Scheduler(options.seed, options.traceLength ?? 200);
  const net = new SimNetwork(sched);
  const names = Array.from({ length: options.nodes }, (_, i) => `n${i + 1}`);
  const { o, snapshotEntries, faultKinds, profile } = runSettings(sched, options);
  if (profile !== undefined) sched.note(profile);
  // Priority seeds run with sync-standbys 0, 1 or 2 (all standbys: with sync-standbys-allow-stall).
  const syncStandbys = o.mode === 'priority' ? sched.pick([0, 1, 2].filter((n) => n < o.nodes)) : 0;
  const sync = o.mode === 'priority' ? { 'sync-standbys': syncStandbys, 'sync-standbys-allow-stall': syncStandbys > 0 && syncStandbys >= o.nodes - 1 } : {};
  if (o.mode === 'priority') sched.note(`priority cluster, sync-standbys ${syncStandbys}`);
  // A spare machine the operator adds to the cluster, promotes and removes again (Raft membership).
  const actions = operatorActions(o);
  if (actions.includes('member-change')) names.push(`n${options.nodes + 1}`);
  const machines = names.map(
    (name) =>
      new SimMachine(
        sched,
        net,
        {
          name,
          peers: names.slice(0, options.nodes),
          mode: o.mode,
          flags: { 'heartbeat-interval': 20, 'failover-timeout': FAILOVER_TIMEOUT_MS, 'raft-snapshot-entries': snapshotEntries, 'client-tokens': SIM_CLIENT_IDENTITIES, ...sync },
        },
        { rate: 0.995 + sched.random() * 0.01, wallOffsetMs: o.mode === 'priority' ? sched.int(-PRIORITY_WALL_ERROR_MS, PRIORITY_WALL_ERROR_MS) : sched.int(-100, 100) },
      ),
  );
  const members = machines.slice(0, options.nodes);
  const invariants = new RaftInvariants((name, term, view) =>
    sched.note(`${name}: leads term ${term} (log ${view.status.snapshot}..${view.status.lastIndex}, commit ${view.status.commit})`),
  );
  const starts = new Map<string, number>();
  /** Priority mode: per "from>to", the spans during which `to` could not hear `from`. */
  const deaf = new Map<string, Spans>();
  const noteActives = () => {
    for (const a of machines) {
      for (const b of machines) {
        if (a === b) continue;
        const key = `${a.name}>${b.name}`;
        const spans = deaf.get(key) ?? (deaf.set(key, []).get(key)!);
        markSpan(spans, !net.reaches(a.name, b.name), sched.now);
      }
    }
  };
  /**
   * A later grant's smaller token is excused in priority mode only when the
   * nodes that granted the two could not hear each other (either way),
   * within a failover-timeout before that grant and until its own (a
   * partition: docs/cluster.md, what is lost). Two actives that can hear
   * each other excuse nothing (a paused active that resumes must not grant
   * before it has heard its successor). A clock beyond the bound excuses only
   * the order after tokens its node issued while it was off (the nodes refuse
   * to take over from it, not to serve on: priority-checks.ts), and a smaller
   * token from a node whose clock was off when it granted and which could not
   * hear the other granter since that one's grant: alone, a clock running
   * behind looks like any other (docs/cluster.md promises the order only
   * within the bound; fresh swarm seed 3244010013). Tokens name their node:
   * their residue modulo 16 is its index in its peers list, which a mistaken
   * list can make another node's too (swarm seed 124): then either may have
   * granted it. And a token that ran ahead of real time by more than the
   * bound (a clock beyond it dragged the tokens ahead) orders nothing for a
   * node whose data directory was wiped since: docs/cluster.md, "a node that
   * never heard them may later issue smaller ones" (priority seed 500184: the
   * only node that remembered them lost its disk while the others were down).
   */
  const tokenExcused = (a: Grant, b: Grant): boolean => {
    // A partition's effects last until the links are up again (RELINK_MS) and a heartbeat has crossed.
    const from = a.invokedAt - FAILOVER_TIMEOUT_MS - RELINK_MS;
    const to = b.completedAt!;
    if (priority === undefined) return false;
    const { checks } = priority;
    // After the switch to Raft, tokens follow the log, not the nodes' residues: any node may have granted it.
    const switchedAt = priority.faults.switchedAt ?? Infinity;
    const grantersOf = (g: Grant) => (g.invokedAt >= switchedAt ? machines : checks.granters(g.token));
    const aheadOfTime = tokenWallMs(a.token) - (SIM_EPOCH_MS + a.completedAt!) > CLOCK_BOUND_MS;
    if (aheadOfTime && grantersOf(b).some((g) => g.wipedAt.some((t) => t > a.completedAt! && t < b.invokedAt))) return true;
    return grantersOf(a).some((granterA) => {
      if (checks.wasOffClock(granterA.name, a.completedAt!)) return true;
      return grantersOf(b).some((granterB) => {
        if (granterA === granterB) return false;
        if (checks.wasOffClock(granterB.name, b.completedAt!) && !checks.couldHear(granterA.name, granterB.name, a.completedAt!, b.invokedAt)) return true;
        // Either way: a link needs both directions to come up (its handshake answers).
        return overlaps(deaf.get(`${granterA.name}>${granterB.name}`) ?? [], from, to) || overlaps(deaf.get(`${granterB.name}>${granterA.name}`) ?? [], from, to);
      });
    });
  };
  /** What the disk checks last saw: they run again only when a disk, a durable index or the commit index moved. */
  const ownDurableSeen = new Map<string, string>();
  let lastDurable = '';
  const checkSafety = () => {
    const views = new Map<string, RaftLogView>();
    for (const m of machines) {
      if (m.starts !== starts.get(m.name)) {
        starts.set(m.name, m.starts);
        invariants.restarted(m.name);
      }
      const view = m.state === 'up' ? m.node?.raftLog() : undefined;
      if (view !== undefined) views.set(m.name, view);
    }
    if (o.mode !== 'raft') return noteActives();
    invariants.check(views);
    for (const m of machines) {
      const view = views.get(m.name);
      if (view === undefined || faults.isDamaged(m)) continue;
      // What the check reads: the disk, and the entries counted as written (a node that appends
      // past its durable index counts the new entries at once: a stale durable index shows then).
      const seen = `${m.fs.durableVersion} ${Math.min(view.durableIndex, view.status.lastIndex)} ${view.status.snapshot}`;
      if (ownDurableSeen.get(m.name) === seen) continue;
      ownDurableSeen.set(m.name, seen);
      invariants.checkOwnDurable(m.name, view, durableLog(m.fs));
    }
    // Committed data can only lose a copy when a disk's durable state changes, and only a new
    // commit can count a copy that is not there: check then (the disks' reads are cached).
    const seen = `${invariants.highestCommitted} ${faults.damagedNodes} ${machines.map((m) => m.fs.durableVersion).join(' ')}`;
    if (seen === lastDurable) return;
    lastDurable = seen;
    invariants.checkDurable(options.nodes, machines.map((m) => durableLog(m.fs)), faults.damagedNodes);
  };

  const workload = new Workload(sched, net, {
    clients: o.clients,
    pipeliningClients: o.pipeliningClients,
    libraryClients: o.libraryClients,
    keys: o.keys,
    servers: members.map((m) => m.address),
    until: o.durationMs,
    // Named identities and bare tokens by turns: grants carry owners (machine.ts).
    tokens: [SIM_CLIENT_TOKENS.alice, SIM_CLIENT_TOKENS.bare, SIM_CLIENT_TOKENS.bob],
  });
  const restoreClientClock = simulateClientClock(sched);
  const othersHoldCommitted = (victim: SimMachine) => {
    if (o.mode !== 'raft') return true;
    const index = invariants.highestCommitted;
    const term = invariants.highestCommittedTerm;
    return operator.memberMachines.every((m) => m === victim || index === 0 || durableLog(m.fs).has(index, term));
  };
  const operator = new Operator(sched, members, machines.slice(options.nodes), { meanGapMs: (OPERATOR_GAP_MS * o.faultGapMs) / DEFAULT_OPTIONS.faultGapMs, until: o.durationMs, actions });
  if (actions.includes('upgrade') && sched.chance(0.3)) {
    // A rolling upgrade under way: the cluster starts on the previous release, and the operator
    // moves it to this one node by node (operator.ts); spares added meanwhile run this release.
    sched.note(`the cluster starts on the previous release (peer protocol ${PREVIOUS_RELEASE_PROTOCOLS.join(',')})`);
    for (const m of members) m.peerProtocols = PREVIOUS_RELEASE_PROTOCOLS;
    operator.upgrading = true;
  }
  const faults = new FaultInjector(sched, net, machines, {
    meanGapMs: o.faultGapMs,
    until: o.durationMs,
    ...(faultKinds === undefined ? {} : { kinds: faultKinds }),
    exclude: o.excludeFaults ?? [],
    othersHoldCommitted,
    osSuspend: o.osSuspend === true,
    ...(o.mode === 'priority' ? { maxWallErrorMs: PRIORITY_WALL_ERROR_MS } : {}),
  });
  // Priority mode only (a raft seed draws nothing more than before).
  const priority = o.mode !== 'priority' ? undefined : priorityWorld(sched, net, machines, o, syncStandbys, tokenExcused, () => workload.holds());
  let failure: string | undefined;
  let checkSteps = 0;
  const fail = (why: string) => {
    failure ??= why;
  };
  const stopped = () => failure !== undefined || sched.thrown !== undefined || sched.ownFailure !== undefined;
  // A promise of the node's code rejected with nobody to catch it: a real process would die of it.
  const onRejection = (reason: unknown) => {
    sched.thrown ??= reason instanceof Error ? reason : new Error(String(reason));
  };
  process.on('unhandledRejection', onRejection);
  const afterEach = () => {
    try {
      checkSafety();
    } catch (err) {
      if (err instanceof SafetyViolation) fail(`safety: ${err.message}`);
      else throw err;
    }
    const broken = priority?.checks.afterEvent(workload.history);
    if (broken !== undefined) fail(broken);
  };

  try {
    for (const m of members) m.start();
    sched.after(100, 'workload: start', () => workload.start());
    sched.after(200, 'faults: start', () => faults.start());
    if (priority !== undefined) sched.after(200, 'priority faults: start', () => priority.faults.start());
    sched.after(300, 'operator: start', () => operator.start());
    await sched.run(o.durationMs + 500, afterEach, stopped);
    if (!stopped()) {
      sched.note('--- repairs: heal, resume, restart everything');
      priority?.faults.repairAll();
      faults.repairAll();
      await sched.run(sched.now + 1_500, afterEach, stopped);
      faults.repairAll(); // a node that refused meanwhile gets its new disk too
      await livenessProbe(sched, net, machines, workload.history, fail, afterEach, stopped);
      const behind = olderLinkBetweenNew(machines);
      if (behind !== undefined && !stopped()) fail(`upgrade: ${behind}`);
    }
  } catch (err) {
    fail(`the simulation itself failed: ${(err as Error).stack ?? String(err)}`);
  }
  workload.closeAll();
  if (sched.thrown === undefined && sched.ownFailure === undefined) await sched.run(sched.now + 100);
  restoreClientClock();
  process.off('unhandledRejection', onRejection);
  if (sched.thrown !== undefined) fail(`a node's code threw (a real process would have died): ${sched.thrown.stack ?? sched.thrown.message}`);
  if (sched.ownFailure !== undefined) fail(`a node's own failure: ${sched.ownFailure}`);

  if (failure === undefined && o.mode === 'raft') {
    try {
      const backup = backupViolation(machines, workload.history, (m) => faults.isDamaged(m));
      if (backup !== undefined) fail(`backup: ${backup}`);
    } catch (err) {
      fail(`backup: taking it threw: ${(err as Error).stack ?? String(err)}`);
    }
  }
  const tokens = tokenViolation(workload.history, o.mode === 'priority' ? tokenExcused : () => false);
  if (tokens !== undefined) fail(`tokens: ${tokens}`);
  const overlap = o.mode === 'raft' ? findOverlap(workload.holds()) : undefined;
  if (overlap !== undefined) fail(`mutual exclusion as the clients saw it: ${overlap}`);
  if (priority !== undefined && failure === undefined) {
    const lost = priority.checks.atEnd(workload.history, workload.holds());
    if (lost !== undefined) fail(lost);
  }
  if (failure === undefined && o.mode === 'raft') {
    // Every unknown acquire here comes from a connection that closed: a grant to it may have been released at once (PROTOCOL.md).
    const budget = o.checkSteps ?? DEFAULT_CHECK_STEPS;
    // A warp is a standstill: after one the nodes need their usual slack again (scheduler.ts).
    const verdict: Verdict = check(workload.history, { slackMs: o.slackMs, maxStepsPerKey: budget, timeLimitMs: Infinity, ghostReleases: true, standstills: sched.warps });
    checkSteps = verdict.steps;
    if (verdict.anomalies.length > 0) fail(`history: not linearizable\n${formatVerdict(verdict, 5)}`);
    else if (verdict.inconclusive) fail(`history: inconclusive, the search needed more than ${budget} steps on ${verdict.inconclusiveKeys.join(', ')} (replay with a larger --check-steps to decide it)`);
  }
  return {
    seed: o.seed,
    ok: failure === undefined,
    failure,
    trace: [...sched.recent],
    events: sched.steps,
    simulatedMs: sched.now,
    operations: workload.history.length,
    faults: faults.counts,
    history: workload.history,
    profile,
    coverage: sched.coverage,
    checkSteps,
    longestTask: [...sched.longestTask].map(([host, t]) => ({ host, ...t })).sort((a, b) => b.ms - a.ms)[0],
  };
}

/** A priority seed's own faults and checks (priority-faults.ts, priority-checks.ts). */
function priorityWorld(sched: Scheduler, net: SimNetwork, machines: SimMachine[], o: SimulationOptions, syncStandbys: number, excused: (a: Grant, b: Grant) => boolean, holds: () => readonly Hold[]) {
  const faults = new PriorityFaults(sched, net, machines, {
    meanGapMs: o.faultGapMs * 2,
    until: o.durationMs,
    failoverTimeoutMs: FAILOVER_TIMEOUT_MS,
    clockBoundMs: CLOCK_BOUND_MS,
    normalWallErrorMs: PRIORITY_WALL_ERROR_MS,
    calm: o.faultGapMs > DEFAULT_OPTIONS.faultGapMs,
    osSuspend: o.osSuspend === true,
  });
  const checks = new PriorityChecks(sched, net, machines, faults, { failoverTimeoutMs: FAILOVER_TIMEOUT_MS, heartbeatMs: 20, clockBoundMs: CLOCK_BOUND_MS, syncStandbys, excused, holds });
  return { faults, checks };
}

/**
 * Two nodes of this release that are linked must speak its newest peer
 * protocol, whatever the nodes of the previous release around them speak
 * (docs/versioning.md: each dial offers the newest version first). A link is
 * the dialler's outbound stream and the listener's inbound one: a dialler
 * may still hold a half-open link to a process that died while a partition
 * dropped its reset (a Raft follower never writes to another follower, so
 * nothing tells it), which the peer, restarted, no longer has; that one
 * carries nothing and is left out.
 */
function olderLinkBetweenNew(machines: readonly SimMachine[]): string | undefined {
  const newest = machines.filter((m) => m.state === 'up' && m.node !== undefined && m.peerProtocols === undefined);
  const peerView = (of: SimMachine, name: string) => of.node!.status().peers.find((p) => p.name === name)?.peerProtocol;
  for (const m of newest) {
    for (const other of newest) {
      if (other === m) continue;
      const out = peerView(m, other.nodeName)?.outbound;
      const inbound = peerView(other, m.nodeName)?.inbound;
      if (out === undefined || inbound === undefined) continue;
      if (out < 3 || inbound < 3) return `${m.name}'s link to ${other.name}, both of this release, runs at peer protocol ${out} (${other.name} reads it at ${inbound}), not 3`;
    }
  }
  return undefined;
}

/** After the repairs, one fresh acquire must be granted (following redirects) within LIVENESS_MS. */
async function livenessProbe(
  sched: Scheduler,
  net: SimNetwork,
  machines: readonly SimMachine[],
  history: Operation[],
  fail: (why: string) => void,
  afterEach: () => void,
  stopped: () => boolean,
): Promise<void> {
  const deadline = sched.now + LIVENESS_MS;
  let granted = false;
  let target = machines[0]!.address;
  let redirectedTo = false;
  const attempt = () => {
    if (granted || sched.now > deadline) return;
    const conn = new WireConnection(sched, net, 'probe', target, history, 'probe', {
      redirected: (address) => {
        target = address ?? sched.pick(machines).address;
        redirectedTo = true;
      },
      closed: () => {
        if (granted) return;
        // Not redirected (refused, reset, no leader yet): try another node.
        if (!redirectedTo) target = sched.pick(machines).address;
        redirectedTo = false;
        sched.after(100, 'probe: retry', attempt);
      },
    }, undefined, SIM_CLIENT_TOKENS.bare);
    conn.acquire('liveness', 2, 1, (o) => {
      if (o.kind === 'granted') granted = true;
      else if (o.kind !== 'unknown') conn.reset();
    });
    // A connection into a node that is still electing: give up on it after a while.
    sched.after(3_000, 'probe: give up on this connection', () => {
      if (!granted) conn.reset();
    });
  };
  attempt();
  await sched.run(deadline, afterEach, () => granted || stopped());
  if (!granted && !stopped()) {
    const states = machines
      .map((m) => {
        const r = m.node?.raftLog();
        const raft = r === undefined ? '' : ` ${m.node!.role} term ${r.status.term} leader ${r.status.leader ?? '-'} log ${r.status.snapshot}..${r.status.lastIndex} commit ${r.status.commit}`;
        return `${m.name}=${m.state}${raft}${m.lastError === undefined ? '' : ` (last error: ${m.lastError})`}`;
      })
      .join(', ');
    fail(`liveness: no acquire granted within ${LIVENESS_MS} ms after every fault was repaired (${states}); the last probe went to ${target}`);
  }
}
