/**
 * `npm run bench`: runs every benchmark scenario, peers side by side in the
 * same run, and prints a table with ratios against the targets.
 *
 *   npm run bench                      # everything
 *   npm run bench -- --only pairs,hotkey --duration 5
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { runClientLoad } from './client-load.js';
import type { LoadResult, LoadSpec } from './loadgen.js';
import { failoverOnce, handOffGapOnce, median, percentile, sampleLag, startTwoNodes } from './cluster-bench.js';
import type { ChildProcess } from 'node:child_process';
import { REPO, rssBytes, runLoad, sleep, startBare, startEtcd, startLoad, startRedis, startTicketing } from './procs.js';
import { raftClientHandOverOnce, raftFailoverOnce, startRaftCluster, type RaftCluster } from './raft-bench.js';
import { clientFailoverOnce, handBackOnce } from './failover-bench.js';

interface Row {
  scenario: string;
  measure: string;
  ticketing: string;
  peer: string;
  ratio: string;
  target: string;
  met: boolean;
}

/** Scenario names, in the order they run (the functions are below). */
const SCENARIOS = ['pairs', 'extend', 'hotkey', 'memory', 'cluster', 'failover', 'flood', 'raft', 'peertls', 'client'];

const USAGE = `usage: npm run bench -- [--only SCENARIO,...] [--duration S] [--warmup S] [--rounds N]

Runs the benchmark scenarios (Ticketing and its peers side by side) and prints
a table of measures against their targets (docs/benchmarks.md).

  --only SCENARIO,...  run only these: ${SCENARIOS.join(', ')} (default: all)
  --duration S         seconds measured per round (default 5)
  --warmup S           seconds of load before each round is measured (default 1.5)
  --rounds N           rounds per side; each side's median round counts (default 3)
  --failover-runs N    runs of each failover measurement (default 10; 1 checks the code quickly)
  --help               print this and exit
`;

function usageError(message: string): never {
  process.stderr.write(`bench: ${message} (run with --help for usage)\n`);
  process.exit(2);
}

let parsed;
try {
  parsed = parseArgs({
    options: {
      only: { type: 'string' },
      duration: { type: 'string', default: '5' },
      warmup: { type: 'string', default: '1.5' },
      rounds: { type: 'string', default: '3' },
      'failover-runs': { type: 'string', default: '10' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
} catch (err) {
  // parseArgs says "Unknown option '--x'. To specify a positional argument starting with a '-', ...": the first sentence is enough.
  usageError((err as Error).message.split('. ')[0]!.replace(/^Unknown/, 'unknown'));
}
const { values } = parsed;
const failoverRuns = Number(values['failover-runs']);
if (values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
const rounds = Number(values.rounds);
const only = values.only?.split(',');
const unknownScenario = only?.find((name) => !SCENARIOS.includes(name));
if (unknownScenario !== undefined) usageError(`unknown scenario "${unknownScenario}" in --only; one of: ${SCENARIOS.join(', ')}`);
const durationMs = Number(values.duration) * 1000;
const warmupMs = Number(values.warmup) * 1000;
const rows: Row[] = [];

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const ms = (n: number) => `${n.toFixed(2)} ms`;

function add(row: Row): void {
  rows.push(row);
  console.log(`${row.met ? 'MET ' : 'MISS'}  ${row.measure}: ticketing ${row.ticketing}; peer ${row.peer}; ratio ${row.ratio} (target ${row.target})`);
}

// Every bench client is on 127.0.0.1: the per-address limit must not cap the load.
const SERVER_ARGS = ['--memory', '--max-conns', '20000', '--max-conns-per-address', '20000', '--max-pending-per-conn', '4096'];

function spec(target: LoadSpec['target'], port: number, workload: LoadSpec['workload'], conns: number, inflight: number, count?: number): LoadSpec {
  return { workload, target, host: '127.0.0.1', port, conns, inflight, warmupMs, durationMs, ...(count === undefined ? {} : { count }) };
}

/** One side of a comparison: a workload, and the server process whose CPU it costs. */
interface Side {
  spec: LoadSpec;
  cpuOf?: ChildProcess;
}

/**
 * Runs the sides in turn `rounds` times and keeps each side's median round
 * (by throughput): on a shared 2-core machine single runs are noisy, and
 * alternating keeps slow periods from favouring one side.
 */
async function sideBySide(sides: Side[]): Promise<LoadResult[]> {
  const results: LoadResult[][] = sides.map(() => []);
  for (let i = 0; i < rounds; i++) {
    for (const [n, side] of sides.entries()) results[n]!.push(await runLoad(side.spec, side.cpuOf));
  }
  const median = (rs: LoadResult[]) => [...rs].sort((x, y) => x.opsPerSec - y.opsPerSec)[Math.floor(rs.length / 2)]!;
  console.log(`  rounds: ${results.map((rs) => rs.map((r) => fmt(r.opsPerSec)).join(', ')).join(' vs ')}`);
  return results.map(median);
}

/** "12.3 µs CPU/op" when the server's CPU was measured. */
const cpu = (r: LoadResult, what = 'pair') => (r.serverCpuUsPerOp === undefined ? '' : `, ${r.serverCpuUsPerOp.toFixed(2)} µs server CPU/${what}`);

/**
 * Uncontended acquire+release pairs against Ticketing, Redis (the Redlock
 * pair) and the bare reference server (bare-server.ts: the most a Node.js
 * event loop does for these bytes), with each server's CPU per pair.
 */
async function pairs(): Promise<void> {
  const ticketing = await startTicketing(SERVER_ARGS);
  const redis = await startRedis();
  const bare = await startBare();
  try {
    for (const inflight of [64, 16, 1]) {
      const [t, r, b] = (await sideBySide([
        { spec: spec('ticketing', ticketing.port, 'pairs', 50, inflight), cpuOf: ticketing.proc },
        { spec: spec('redis', redis.port, 'pairs', 50, inflight), cpuOf: redis.proc },
        { spec: spec('ticketing', bare.port, 'pairs', 50, inflight), cpuOf: bare.proc },
      ])) as [LoadResult, LoadResult, LoadResult];
      const vsRedis = t.opsPerSec / r.opsPerSec;
      const vsBare = t.opsPerSec / b.opsPerSec;
      const base = {
        scenario: 'pairs',
        ticketing: `${fmt(t.opsPerSec)} pairs/s (p50 ${ms(t.p50Ms)}, p99 ${ms(t.p99Ms)}${cpu(t)})`,
        peer: `Redis SET NX + EVALSHA: ${fmt(r.opsPerSec)} pairs/s (p99 ${ms(r.p99Ms)}${cpu(r)}); bare ceiling: ${fmt(b.opsPerSec)} pairs/s (p99 ${ms(b.p99Ms)}${cpu(b)})`,
        ratio: `${vsRedis.toFixed(2)}x Redis, ${vsBare.toFixed(2)}x ceiling`,
      };
      const measure = `uncontended pairs/s, 50 conns x ${inflight} in flight`;
      if (inflight === 64) add({ ...base, measure, target: '>= 0.7x the bare ceiling', met: vsBare >= 0.7 });
      // (Issue 31's goal; 2x Redis before it, out of reach while the load generator is the limit at x 16.)
      if (inflight === 16) add({ ...base, measure, target: '>= 0.9x the bare ceiling', met: vsBare >= 0.9 });
      if (inflight === 1) add({ ...base, measure, target: '>= 1.0x Redis', met: vsRedis >= 1.0 });
      if (t.errors > 0 || r.errors > 0 || b.errors > 0) console.log(`  errors: ticketing ${t.errors}, redis ${r.errors}, bare ${b.errors}`);
    }
  } finally {
    await ticketing.stop();
    await redis.stop();
    await bare.stop();
  }
}

/**
 * What an extension costs: uncontended pairs with one `X` each between the
 * grant and the release, against plain pairs, on one server, alternating
 * rounds. An extension is one more request (and, in a cluster, one more
 * replicated command), so a third more work per pair is the expectation.
 */
async function extend(): Promise<void> {
  const ticketing = await startTicketing(SERVER_ARGS);
  try {
    const [plain, extended] = (await sideBySide([
      { spec: spec('ticketing', ticketing.port, 'pairs', 50, 16), cpuOf: ticketing.proc },
      { spec: spec('ticketing', ticketing.port, 'extend-pairs', 50, 16), cpuOf: ticketing.proc },
    ])) as [LoadResult, LoadResult];
    const ratio = extended.opsPerSec / plain.opsPerSec;
    const perExtension = extended.serverCpuUsPerOp === undefined || plain.serverCpuUsPerOp === undefined ? '' : `; one extension: ${(extended.serverCpuUsPerOp - plain.serverCpuUsPerOp).toFixed(2)} µs server CPU`;
    add({
      scenario: 'extend',
      measure: 'pairs with one extension each vs plain pairs, 50 conns x 16 in flight',
      ticketing: `${fmt(extended.opsPerSec)} extended pairs/s (p50 ${ms(extended.p50Ms)}, p99 ${ms(extended.p99Ms)}${cpu(extended)}${perExtension})`,
      peer: `plain pairs: ${fmt(plain.opsPerSec)} pairs/s (p99 ${ms(plain.p99Ms)}${cpu(plain)})`,
      ratio: `${ratio.toFixed(2)}x`,
      target: '>= 0.6x plain pairs/s (an X is a third more requests)',
      met: ratio >= 0.6,
    });
    if (plain.errors > 0 || extended.errors > 0) console.log(`  errors: plain ${plain.errors}, extended ${extended.errors}`);
  } finally {
    await ticketing.stop();
  }
}

async function hotkey(): Promise<void> {
  const ticketing = await startTicketing(SERVER_ARGS);
  const redis = await startRedis();
  try {
    const [t, r] = (await sideBySide([
      { spec: spec('ticketing', ticketing.port, 'hotkey', 50, 1), cpuOf: ticketing.proc },
      { spec: spec('redis', redis.port, 'hotkey', 50, 1), cpuOf: redis.proc },
    ])) as [LoadResult, LoadResult];
    const ratio = t.opsPerSec / r.opsPerSec;
    add({
      scenario: 'hotkey',
      measure: 'one hot key, 50 waiting clients: hand-offs/s',
      ticketing: `${fmt(t.opsPerSec)}/s, Jain ${t.fairness!.toFixed(4)}, p99 wait ${ms(t.p99Ms)}${cpu(t, 'hand-off')}`,
      peer: `Redis spin SET NX every 1-2 ms: ${fmt(r.opsPerSec)}/s, Jain ${r.fairness!.toFixed(4)}, p99 wait ${ms(r.p99Ms)}${cpu(r, 'hand-off')}`,
      ratio: `${ratio.toFixed(2)}x`,
      target: '>= 3x Redis, Jain >= 0.99, p99 <= 10 ms',
      met: t.fairness! >= 0.99 && t.p99Ms <= 10 && ratio >= 3,
    });
  } finally {
    await ticketing.stop();
    await redis.stop();
  }
}

async function memory(): Promise<void> {
  const keys = 1_000_000;
  const server = await startTicketing([...SERVER_ARGS, '--max-locks', String(keys)]);
  try {
    await sleep(500);
    const before = rssBytes(server.proc.pid!);
    const hold = await startLoad({ ...spec('ticketing', server.port, 'hold', 4, 256, keys) });
    await sleep(2_000);
    const after = rssBytes(server.proc.pid!);
    await hold.stop();
    const perKey = (after - before) / keys;
    add({
      scenario: 'memory',
      measure: `RSS per held key at ${fmt(keys)} held keys`,
      ticketing: `${perKey.toFixed(0)} bytes/key (RSS ${fmt(before / 2 ** 20)} -> ${fmt(after / 2 ** 20)} MiB; ${fmt(hold.result.ops)} held)`,
      peer: '-',
      ratio: '-',
      target: '<= 150 bytes/key',
      met: perKey <= 150 && hold.result.ops === keys,
    });
  } finally {
    await server.stop();
  }
  const conns = 10_000;
  const server2 = await startTicketing(SERVER_ARGS);
  try {
    await sleep(500);
    const before = rssBytes(server2.proc.pid!);
    const idle = await startLoad(spec('ticketing', server2.port, 'idle', 1, 1, conns));
    await sleep(2_000);
    const after = rssBytes(server2.proc.pid!);
    await idle.stop();
    const perConn = (after - before) / conns;
    add({
      scenario: 'memory',
      measure: `RSS per idle connection at ${fmt(conns)} connections`,
      ticketing: `${fmt(perConn)} bytes/conn (RSS ${fmt(before / 2 ** 20)} -> ${fmt(after / 2 ** 20)} MiB; ${fmt(idle.result.ops)} open)`,
      peer: '-',
      ratio: '-',
      target: '<= 5 KB/conn',
      met: perConn <= 5_000 && idle.result.ops === conns,
    });
  } finally {
    await server2.stop();
  }
}

/**
 * Client overhead: 50 concurrent callers through @ticketing/client (default
 * pool: two connections), against the raw load generator with the same
 * shape (2 connections x 25 in flight), alternating rounds.
 */
async function client(): Promise<void> {
  const server = await startTicketing(SERVER_ARGS);
  try {
    const raw: LoadResult[] = [];
    const viaClient: LoadResult[] = [];
    for (let i = 0; i < rounds; i++) {
      raw.push(await runLoad(spec('ticketing', server.port, 'pairs', 2, 25), server.proc));
      viaClient.push(await runClientLoad({ port: server.port, callers: 50, warmupMs, durationMs }, server.proc));
    }
    const middle = (rs: LoadResult[]) => [...rs].sort((x, y) => x.opsPerSec - y.opsPerSec)[Math.floor(rs.length / 2)]!;
    console.log(`  rounds: client ${viaClient.map((r) => fmt(r.opsPerSec)).join(', ')} vs raw ${raw.map((r) => fmt(r.opsPerSec)).join(', ')}`);
    const [c, r] = [middle(viaClient), middle(raw)];
    const overhead = 1 - c.opsPerSec / r.opsPerSec;
    // The load process's own CPU per pair: what the library costs, less shaken by the machine's other load than the rate.
    // And the server's: on a machine whose cores are busy with other work, the rate follows the two processes' sum.
    const cpu = (x: LoadResult) =>
      (x.selfCpuUsPerOp === undefined ? '' : `, ${x.selfCpuUsPerOp.toFixed(2)} µs client CPU/pair`) +
      (x.serverCpuUsPerOp === undefined ? '' : `, ${x.serverCpuUsPerOp.toFixed(2)} µs server CPU/pair`);
    const cpuRatio = c.selfCpuUsPerOp !== undefined && r.selfCpuUsPerOp !== undefined ? `; CPU per pair ${(c.selfCpuUsPerOp / r.selfCpuUsPerOp).toFixed(2)}x the raw generator's` : '';
    console.log(`  client CPU µs/pair: client ${viaClient.map((x) => x.selfCpuUsPerOp?.toFixed(2)).join(', ')} vs raw ${raw.map((x) => x.selfCpuUsPerOp?.toFixed(2)).join(', ')}`);
    console.log(`  server CPU µs/pair: client ${viaClient.map((x) => x.serverCpuUsPerOp?.toFixed(2)).join(', ')} vs raw ${raw.map((x) => x.serverCpuUsPerOp?.toFixed(2)).join(', ')}`);
    add({
      scenario: 'client',
      measure: 'pairs/s through @ticketing/client, 50 concurrent callers, default pool',
      ticketing: `${fmt(c.opsPerSec)} pairs/s (p50 ${ms(c.p50Ms)}, p99 ${ms(c.p99Ms)}, ${c.errors} errors${cpu(c)})`,
      peer: `raw load generator, 2 conns x 25 in flight: ${fmt(r.opsPerSec)} pairs/s (p99 ${ms(r.p99Ms)}${cpu(r)})`,
      ratio: `${(c.opsPerSec / r.opsPerSec).toFixed(2)}x (overhead ${(overhead * 100).toFixed(0)}%${cpuRatio})`,
      target: 'client overhead <= 15%',
      met: overhead <= 0.15 && c.errors === 0,
    });
  } finally {
    await server.stop();
  }
}

async function cluster(): Promise<void> {
  const single = await startTicketing(SERVER_ARGS);
  const two = await startTwoNodes();
  try {
    const [c, s] = (await sideBySide([{ spec: spec('ticketing', two.aPort, 'pairs', 50, 16) }, { spec: spec('ticketing', single.port, 'pairs', 50, 16) }])) as [
      LoadResult,
      LoadResult,
    ];
    const ratio = c.opsPerSec / s.opsPerSec;
    // Replication lag while the active is under the same full load.
    const load = runLoad(spec('ticketing', two.aPort, 'pairs', 50, 16));
    const lag = await sampleLag(two.a, load);
    add({
      scenario: 'cluster',
      measure: 'replication lag at full load (standby behind the active)',
      ticketing: `p50 ${ms(percentile(lag.ms, 50))}, p99 ${ms(percentile(lag.ms, 99))}; commands behind p50 ${fmt(percentile(lag.commands, 50))}, p99 ${fmt(percentile(lag.commands, 99))} (${lag.ms.length} samples)`,
      peer: '-',
      ratio: '-',
      target: 'reported',
      met: lag.ms.length > 0,
    });
    add({
      scenario: 'cluster',
      measure: '2-node priority cluster pairs/s (50 conns x 16), vs single node',
      ticketing: `${fmt(c.opsPerSec)} pairs/s (p99 ${ms(c.p99Ms)})`,
      peer: `single node: ${fmt(s.opsPerSec)} pairs/s`,
      ratio: `${ratio.toFixed(2)}x`,
      target: '>= 0.8x',
      met: ratio >= 0.8,
    });
  } finally {
    await two.stop();
    await single.stop();
  }
  const failovers: number[] = [];
  for (let i = 0; i < 10; i++) failovers.push(await failoverOnce());
  add({
    scenario: 'cluster',
    measure: 'kill -9 active -> first grant on the new active (failover-timeout 500 ms)',
    ticketing: `median ${ms(median(failovers))} over 10 runs (min ${ms(Math.min(...failovers))}, max ${ms(Math.max(...failovers))})`,
    peer: '-',
    ratio: '-',
    target: '<= 1 s median',
    met: median(failovers) <= 1_000,
  });
  const gaps: number[] = [];
  for (let i = 0; i < 5; i++) gaps.push(await handOffGapOnce());
  add({
    scenario: 'cluster',
    measure: 'graceful hand-off (SIGTERM): last grant on old active -> first grant on successor',
    ticketing: `median ${ms(median(gaps))} over 5 runs (max ${ms(Math.max(...gaps))})`,
    peer: '-',
    ratio: '-',
    target: '<= 100 ms',
    met: median(gaps) <= 100,
  });
}

/**
 * A priority cluster as its clients see it, through the official TypeScript
 * client's acquire/release loop (failover-timeout 500 ms): kill -9 of the
 * active, an active that hangs (SIGSTOP), SIGTERM (the hand-off), the
 * hand-back to a returning higher-priority node under that load, and what
 * --sync-standbys 1 costs in throughput.
 */
async function failover(): Promise<void> {
  const times = async (what: () => Promise<number>) => {
    const all: number[] = [];
    for (let i = 0; i < failoverRuns; i++) all.push(await what());
    return all;
  };
  const over = (all: number[]) => `median ${ms(median(all))}, max ${ms(Math.max(...all))} over ${all.length} runs (min ${ms(Math.min(...all))})`;
  const kills = await times(async () => clientFailoverOnce('SIGKILL'));
  add({
    scenario: 'failover',
    measure: 'kill -9 active -> first successful acquire through the TypeScript client (failover-timeout 500 ms)',
    ticketing: over(kills),
    peer: '-',
    ratio: '-',
    target: '<= 500 ms median, <= 1 s max',
    met: median(kills) <= 500 && Math.max(...kills) <= 1_000,
  });
  const hangs = await times(async () => clientFailoverOnce('SIGSTOP'));
  add({
    scenario: 'failover',
    measure: 'a silent active (SIGSTOP: alive, answering nothing) -> first successful acquire on the standby, through the TypeScript client',
    ticketing: over(hangs),
    peer: '-',
    ratio: '-',
    target: '<= 2 s max',
    met: Math.max(...hangs) <= 2_000,
  });
  const terms = await times(async () => clientFailoverOnce('SIGTERM'));
  add({
    scenario: 'failover',
    measure: 'SIGTERM hand-off: last acquire on the old active -> first on the successor, through the TypeScript client',
    ticketing: over(terms),
    peer: '-',
    ratio: '-',
    target: '<= 50 ms median',
    met: median(terms) <= 50,
  });
  const backs = await times(handBackOnce);
  add({
    scenario: 'failover',
    measure: 'hand-back under the client loop: the returning higher-priority node ready -> its first grant',
    ticketing: over(backs),
    peer: '-',
    ratio: '-',
    target: '<= 2 failover timeouts (1 s) max',
    met: Math.max(...backs) <= 1_000,
  });
  const async = await startTwoNodes();
  const sync = await startTwoNodes(['--sync-standbys', '1', '--sync-standbys-allow-stall']);
  try {
    const [a, s] = (await sideBySide([{ spec: spec('ticketing', async.aPort, 'pairs', 50, 16) }, { spec: spec('ticketing', sync.aPort, 'pairs', 50, 16) }])) as [
      LoadResult,
      LoadResult,
    ];
    add({
      scenario: 'failover',
      measure: '--sync-standbys 1: pairs/s (50 conns x 16), vs asynchronous replication',
      ticketing: `${fmt(s.opsPerSec)} pairs/s (p99 ${ms(s.p99Ms)})`,
      peer: `asynchronous: ${fmt(a.opsPerSec)} pairs/s (p99 ${ms(a.p99Ms)})`,
      ratio: `${(s.opsPerSec / a.opsPerSec).toFixed(2)}x`,
      target: 'reported',
      met: true,
    });
  } finally {
    await async.stop();
    await sync.stop();
  }
}

/** 10k connections each pipelining up to max-pending-per-conn acquires that wait: the memory the limits allow. */
async function flood(): Promise<void> {
  const server = await startTicketing(['--memory', '--max-conns', '20000', '--max-conns-per-address', '20000']);
  try {
    await sleep(500);
    const before = rssBytes(server.proc.pid!);
    const load = await startLoad(spec('ticketing', server.port, 'flood', 10_000, 1024));
    const after = rssBytes(server.proc.pid!);
    await load.stop();
    add({
      scenario: 'flood',
      measure: '10,000 connections x 1,024 pipelined waiting acquires (default limits)',
      ticketing: `RSS ${fmt(before / 2 ** 20)} -> ${fmt(after / 2 ** 20)} MiB for ${fmt(load.result.ops)} requests (${fmt(load.result.errors)} answered B at once)`,
      peer: '-',
      ratio: '-',
      target: 'bounded (docs/security.md)',
      met: after < 2 * 2 ** 30,
    });
  } finally {
    await server.stop();
  }
}

/** Raft mode against a single-node etcd in the same run. */
async function raft(): Promise<void> {
  // The admin listener on: its /status counts each node's WAL writes and appends (group commit).
  const cluster = await startRaftCluster(3, ['--http', '127.0.0.1:0']);
  const etcd = await startEtcd();
  try {
    const leader = await cluster.leaderPort();
    const before = await raftIo(cluster);
    const [t, e] = (await sideBySide([{ spec: spec('ticketing', leader, 'pairs', 50, 1) }, { spec: spec('etcd', etcd.port, 'pairs', 50, 1), cpuOf: etcd.proc }])) as [
      LoadResult,
      LoadResult,
    ];
    const after = await raftIo(cluster);
    for (const i of cluster.nodes.keys()) {
      const d = (k: keyof RaftIo) => after[i]![k] - before[i]![k];
      const role = cluster.ports[i] === leader ? 'leader' : 'follower';
      console.log(`  n${i} (${role}): ${fmt(d('walEntries'))} entries in ${fmt(d('walWrites'))} WAL writes (${(d('walEntries') / d('walWrites')).toFixed(1)} per fsync)${role === 'leader' ? `, ${fmt(d('appendEntriesSent'))} in ${fmt(d('appendsSent'))} appends (${(d('appendEntriesSent') / d('appendsSent')).toFixed(1)} per message)` : ''}`);
    }
    const ratio = t.opsPerSec / e.opsPerSec;
    add({
      scenario: 'raft',
      measure: '3-node Raft (fsync on, one machine) pairs/s, 50 clients, vs single-node etcd',
      ticketing: `${fmt(t.opsPerSec)} pairs/s`,
      peer: `etcd txn create-if-absent + delete: ${fmt(e.opsPerSec)} pairs/s${cpu(e)}`,
      ratio: `${ratio.toFixed(2)}x`,
      target: '>= 6x',
      met: ratio >= 6,
    });
    add({
      scenario: 'raft',
      measure: 'acquire latency at 50 clients (p50 / p99)',
      ticketing: `${ms(t.acquireP50Ms!)} / ${ms(t.acquireP99Ms!)}`,
      peer: `etcd: ${ms(e.acquireP50Ms!)} / ${ms(e.acquireP99Ms!)}`,
      ratio: `p99 ${(t.acquireP99Ms! / e.acquireP99Ms!).toFixed(2)}x`,
      target: 'reported; p99 below etcd',
      met: t.acquireP99Ms! < e.acquireP99Ms!,
    });
  } finally {
    await cluster.stop();
    await etcd.stop();
  }
  const failovers: number[] = [];
  for (let i = 0; i < 10; i++) failovers.push(await raftFailoverOnce());
  add({
    scenario: 'raft',
    measure: 'Raft: kill -9 leader -> first grant on the new leader',
    ticketing: `median ${ms(median(failovers))} over 10 runs (min ${ms(Math.min(...failovers))}, max ${ms(Math.max(...failovers))})`,
    peer: '-',
    ratio: '-',
    target: '<= 1.5 s median',
    met: median(failovers) <= 1_500,
  });
  const handOvers: number[] = [];
  for (let i = 0; i < 10; i++) handOvers.push(await raftClientHandOverOnce());
  add({
    scenario: 'raft',
    measure: 'Raft: SIGTERM of the leader (leadership transfer) -> first successful acquire through the TypeScript client',
    ticketing: `median ${ms(median(handOvers))} over 10 runs (min ${ms(Math.min(...handOvers))}, max ${ms(Math.max(...handOvers))})`,
    peer: '-',
    ratio: '-',
    target: '<= 100 ms median',
    met: median(handOvers) <= 100,
  });
}

interface RaftIo {
  readonly walWrites: number;
  readonly walEntries: number;
  readonly appendsSent: number;
  readonly appendEntriesSent: number;
}

/** Each node's Raft I/O counters, from its admin listener's /status. */
async function raftIo(cluster: RaftCluster): Promise<RaftIo[]> {
  return Promise.all(cluster.nodes.map(async (n) => ((await (await fetch(`http://${n.http}/status`)).json()) as { raft: { io: RaftIo } }).raft.io));
}

/**
 * What TLS on peer links costs (issue 25: at most 10%): the same clusters
 * with plain peer links (--insecure-peers, loopback) and with TLS 1.3 keyed
 * by the peer token, side by side. Priority: replication throughput of the
 * active, asynchronous and with --sync-standbys 1 (every reply waits for
 * the standby's acknowledgement over the link); Raft: pairs/s of the leader.
 */
async function peertls(): Promise<void> {
  const ratioRow = (measure: string, tls: LoadResult, plain: LoadResult): void => {
    const ratio = tls.opsPerSec / plain.opsPerSec;
    add({
      scenario: 'peertls',
      measure,
      ticketing: `TLS peer links: ${fmt(tls.opsPerSec)} pairs/s (p99 ${ms(tls.p99Ms)})`,
      peer: `plain peer links: ${fmt(plain.opsPerSec)} pairs/s (p99 ${ms(plain.p99Ms)})`,
      ratio: `${ratio.toFixed(2)}x`,
      target: '>= 0.9x (TLS costs at most 10%)',
      met: ratio >= 0.9,
    });
  };
  for (const extra of [[], ['--sync-standbys', '1', '--sync-standbys-allow-stall']]) {
    const tls = await startTwoNodes(extra, 'tls');
    const plain = await startTwoNodes(extra, 'plain');
    try {
      const [t, p] = (await sideBySide([{ spec: spec('ticketing', tls.aPort, 'pairs', 50, 16), cpuOf: tls.a.proc }, { spec: spec('ticketing', plain.aPort, 'pairs', 50, 16), cpuOf: plain.a.proc }])) as [LoadResult, LoadResult];
      ratioRow(`2-node priority cluster${extra.length > 0 ? ', --sync-standbys 1' : ''}: pairs/s (50 conns x 16), TLS vs plain peer links`, t, p);
    } finally {
      await tls.stop();
      await plain.stop();
    }
  }
  const tls = await startRaftCluster(3, [], 'tls');
  const plain = await startRaftCluster(3, [], 'plain');
  try {
    const [t, p] = (await sideBySide([{ spec: spec('ticketing', await tls.leaderPort(), 'pairs', 50, 1) }, { spec: spec('ticketing', await plain.leaderPort(), 'pairs', 50, 1) }])) as [LoadResult, LoadResult];
    ratioRow('3-node Raft (fsync on) pairs/s, 50 clients, TLS vs plain peer links', t, p);
  } finally {
    await tls.stop();
    await plain.stop();
  }
}

// Every process of the run (servers, load generators) is this Node: `npx -y node@24 packages/bench/dist/run.js` benches Node 24.
const RUNTIME = `Node ${process.version} (V8 ${process.versions.v8}), ${process.platform} ${process.arch}`;
console.log(`bench on ${RUNTIME}`);
// Figures from a loaded machine are not results: say the load, before and after, with every table.
const load = () => loadavg().map((l) => l.toFixed(2)).join(' ');
const loadBefore = load();
console.log(`load average (1, 5, 15 min) before: ${loadBefore} on ${cpus().length} cores`);
if (loadavg()[0]! > 0.5) console.log('WARNING: the machine is not quiet (1-minute load above 0.5): these figures are not results');

const scenarios: Record<string, () => Promise<void>> = { pairs, extend, hotkey, memory, cluster, failover, flood, raft, peertls, client };

for (const [name, run] of Object.entries(scenarios)) {
  if (only !== undefined && !only.includes(name)) continue;
  console.log(`== ${name}`);
  await run();
}

const table = [
  '| measure | Ticketing | peer (same run) | ratio | target | met |',
  '|---|---|---|---|---|---|',
  ...rows.map((r) => `| ${r.measure} | ${r.ticketing} | ${r.peer} | ${r.ratio} | ${r.target} | ${r.met ? 'yes' : '**no**'} |`),
].join('\n');
const header = `Run on ${RUNTIME}; load average (1, 5, 15 min) before ${loadBefore}, after ${load()}.`;
console.log(`\n${header}\n\n${table}\n`);
mkdirSync(`${REPO}.bench-out`, { recursive: true });
writeFileSync(`${REPO}.bench-out/latest.md`, `${header}\n\n${table}\n`);
