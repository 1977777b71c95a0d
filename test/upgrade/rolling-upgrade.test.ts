/**
 * The compatibility promise (docs/versioning.md), on real processes: a cluster
 * started on the previous release (built by `npm run setup` from its tag,
 * scripts/releases.json) is rolled forward one node at a time, each node
 * stopped with SIGTERM and started again on this build with the same data
 * directory and flags, while a `ticketing verify` workload runs against every
 * node. The history must be linearizable (the project's checker), tokens must
 * increase in real time across every key, and at the end the links between
 * the upgraded nodes run the newest peer protocol (3), where during the
 * upgrade they ran 2 with the old nodes. Then one node is rolled back to the
 * previous release on the directory this one wrote (no newer format is
 * written: FORMAT stays 1), and the cluster takes it back.
 *
 * Raft: three voters, the leader handing over at SIGTERM. Priority: three
 * nodes with --sync-standbys 1 (an acknowledged grant is on a standby, so it
 * must survive every step), the standbys first and the active last, so the
 * old active hands off to an upgraded standby and, once upgraded itself, gets
 * it back over a link at version 3.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { check, formatVerdict, isGrant, runWorkload, type Operation, type WorkloadResult } from '@ticketing/checker';
import { BIN, eventually, REPO, runCli, sleep, startServer, TestCluster, tempDir, type RunningServer } from '@ticketing/test-support';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';

interface Release {
  readonly version: string;
  readonly tag: string;
}
const runtimes = (await import(new URL('../../scripts/runtimes.mjs', import.meta.url).href)) as {
  PREVIOUS_RELEASE: Release;
  releaseBin(): string;
  releaseBuilt(): boolean;
  releaseDir(): string;
};
const PREVIOUS = runtimes.PREVIOUS_RELEASE;
const OLD_BIN = runtimes.releaseBin();
const CURRENT = (JSON.parse(readFileSync(join(REPO, 'packages/server/package.json'), 'utf8')) as { version: string }).version;

/** What the tests read of /status (both releases report these). */
interface Status {
  readonly version: string;
  readonly role: string;
  readonly peers: ReadonlyArray<{ readonly name: string; readonly reachable: boolean; readonly lag?: number; readonly peerProtocol?: { readonly outbound?: number; readonly inbound?: number } }>;
  readonly raft?: { readonly leader?: string };
  readonly replication?: { readonly standbysAcking: number };
}

let cluster: TestCluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

beforeAll(() => {
  // Never skipped: a machine without the previous release cannot check the promise.
  if (!runtimes.releaseBuilt()) throw new Error(`release ${PREVIOUS.version} is not built in ${runtimes.releaseDir()}: run npm run setup`);
});

// A new leader counts leases from its own apply time, up to an election later (docs/verify.md).
const SLACK_MS = 1_500;
/** A node is caught up when it is at most this many commands behind (the workload never stops). */
const CAUGHT_UP = 64;

async function status(c: TestCluster, name: string): Promise<Status> {
  return (await c.status(name)) as unknown as Status;
}

async function statuses(c: TestCluster): Promise<Map<string, Status>> {
  const running = c.nodes.filter((n) => n.server !== undefined);
  const all = await Promise.all(running.map(async (n) => status(c, n.name).catch(() => undefined)));
  return new Map(running.flatMap((n, i) => (all[i] === undefined ? [] : [[n.name, all[i]]])));
}

/** Every node up, one leader that every node names, every follower reachable and caught up. */
async function raftHealthy(c: TestCluster): Promise<void> {
  await eventually(
    'a Raft cluster with one leader and every follower caught up',
    async () => {
      const all = await statuses(c);
      const leaders = [...all].filter(([, s]) => s.role === 'leader');
      if (all.size !== c.nodes.length || leaders.length !== 1) return false;
      const [leader, ls] = leaders[0]!;
      return [...all.values()].every((s) => s.raft?.leader === leader) && ls.peers.every((p) => p.reachable && p.lag !== undefined && p.lag <= CAUGHT_UP);
    },
    30_000,
    100,
  );
}

/** Every node up, `active` active, both standbys acknowledging its stream and caught up. */
async function priorityHealthy(c: TestCluster, active: string): Promise<void> {
  await eventually(
    `a priority cluster with ${active} active and both standbys acknowledging`,
    async () => {
      const all = await statuses(c);
      const a = all.get(active);
      if (all.size !== c.nodes.length || a?.role !== 'active') return false;
      const standbys = [...all].filter(([name]) => name !== active);
      return standbys.every(([, s]) => s.role === 'standby') && a.replication?.standbysAcking === 2 && a.peers.every((p) => p.reachable && p.lag !== undefined && p.lag <= CAUGHT_UP);
    },
    30_000,
    100,
  );
}

/**
 * Waits until every link between the nodes in `names` runs at `version` (both directions), as
 * each end of this release reports it (the previous release shows no versions).
 */
async function linksAt(c: TestCluster, names: string[], version: number): Promise<void> {
  let seen = '';
  await eventually(
    `every link between ${names.join(', ')} at peer protocol ${version}`,
    async () => {
      const all = await statuses(c);
      seen = JSON.stringify(Object.fromEntries([...all].map(([n, s]) => [n, s.peers.map((p) => `${p.name}:${p.peerProtocol?.outbound ?? '-'}/${p.peerProtocol?.inbound ?? '-'}`)])));
      const reporting = names.filter((n) => all.get(n)?.version === CURRENT);
      return reporting.length > 0 && names.every((n) => all.has(n)) && reporting.every((n) => {
        const s = all.get(n)!;
        return names.filter((m) => m !== n).every((m) => {
          const p = s.peers.find((x) => x.name === m)?.peerProtocol;
          return p?.outbound === version && p.inbound === version;
        });
      });
    },
    15_000,
    100,
  ).catch((err: Error) => {
    throw new Error(`${err.message}; last seen ${seen}`);
  });
}

/**
 * Tokens increase in real time across every key: a grant that completed before another
 * was invoked holds the smaller token (what "a token larger than every token issued
 * before it" promises a client). Returns the violations.
 */
function tokenOrderViolations(history: readonly Operation[]): string[] {
  const grants = history.filter(isGrant);
  const byCompletion = [...grants].sort((x, y) => x.completedAt! - y.completedAt!);
  const byInvocation = [...grants].sort((x, y) => x.invokedAt - y.invokedAt);
  const out: string[] = [];
  let i = 0;
  let max: (typeof grants)[number] | undefined;
  for (const b of byInvocation) {
    while (i < byCompletion.length && byCompletion[i]!.completedAt! < b.invokedAt) {
      const a = byCompletion[i++]!;
      if (max === undefined || a.token > max.token) max = a;
    }
    if (max !== undefined && b.token <= max.token) out.push(`grant ${b.token} on ${b.key} (invoked at ${b.invokedAt.toFixed(1)}) is not above ${max.token} on ${max.key}, granted at ${max.completedAt!.toFixed(1)}`);
  }
  return out;
}

/** The history is linearizable, tokens increase, and grants were made before, during and after the steps. */
function expectSound(result: WorkloadResult, moments: { readonly started: number; readonly steps: number[]; readonly done: number }): void {
  const verdict = check(result.history, { slackMs: SLACK_MS });
  const grants = result.history.filter(isGrant);
  const answered = result.history.filter((o) => o.outcome !== 'unknown').length;
  const summary = `${result.history.length} operations (${answered} answered, ${grants.length} grants), workload seed ${result.seed}`;
  process.stderr.write(`rolling upgrade: ${summary}, ${verdict.ok ? 'linearizable' : 'ANOMALIES'}\n`);
  expect(verdict.anomalies, formatVerdict(verdict)).toEqual([]);
  expect(verdict.ok).toBe(true);
  expect(tokenOrderViolations(result.history)).toEqual([]);
  const windows = [moments.started, ...moments.steps, moments.done];
  // Served in every stretch between two steps (each at least two seconds): the cluster never stopped serving its clients for good.
  for (let w = 0; w + 1 < windows.length; w++) {
    expect(grants.filter((o) => o.completedAt! >= windows[w]! && o.completedAt! <= windows[w + 1]!).length, `grants between step ${w} and ${w + 1} (${summary})`).toBeGreaterThan(0);
  }
}

/** Stops `name` with SIGTERM (a clean exit) and starts it again with `bin` on the same data directory and flags. */
async function restart(c: TestCluster, name: string, bin: string): Promise<RunningServer> {
  expect(await c.kill(name, 'SIGTERM')).toBe(0);
  return c.start(name, [], undefined, { bin });
}

function formatOf(c: TestCluster, name: string): string {
  return readFileSync(join(c.dataDir(name), 'FORMAT'), 'utf8').trim();
}

function logOf(c: TestCluster, name: string): string {
  return c.node(name).server?.stderr() ?? '';
}

/**
 * Runs `steps` on `c` under the verify workload (every node's address), each
 * step marked with `step()`, then checks the history (expectSound).
 */
async function underLoad(c: TestCluster, steps: (step: () => void) => Promise<void>): Promise<void> {
  const stop = new AbortController();
  const started = performance.now();
  const run = runWorkload({ addresses: c.nodes.map((n) => `127.0.0.1:${n.port}`), durationMs: 120_000, clients: 6, keys: 3, signal: stop.signal });
  const marks: number[] = [];
  try {
    await steps(() => marks.push(performance.now()));
  } finally {
    stop.abort();
  }
  const done = performance.now();
  expectSound(await run, { started, steps: marks, done });
}

describe(`rolling upgrade from ${PREVIOUS.version} (${PREVIOUS.tag}) to ${CURRENT}, under load`, { timeout: 150_000 }, () => {
  it('Raft: three voters rolled forward one at a time, then one rolled back', async () => {
    const c = (cluster = await TestCluster.create(['a', 'b', 'c'], { dataDirs: true, extraArgs: ['--mode', 'raft'] }));
    for (const n of c.nodes) await c.start(n.name, [], undefined, { bin: OLD_BIN });
    await raftHealthy(c);
    for (const s of (await statuses(c)).values()) expect(s.version).toBe(PREVIOUS.version);
    await underLoad(c, async (step) => {
      await sleep(2_000);
      for (const name of ['a', 'b', 'c']) {
        step();
        await restart(c, name, BIN);
        await raftHealthy(c);
        expect((await status(c, name)).version).toBe(CURRENT);
        if (name === 'a') {
          // Mixed: the upgraded node speaks 2 with the others, both ways; they refused its 3 first, as 0.1.0 does.
          await linksAt(c, ['a', 'b'], 2);
          await linksAt(c, ['a', 'c'], 2);
          expect(logOf(c, 'b')).toMatch(/unsupported peer protocol version 3 \(this node speaks 2\)/);
        }
        await sleep(2_000);
      }
      // Every node upgraded: every link at 3.
      await linksAt(c, ['a', 'b', 'c'], 3);
      for (const n of ['a', 'b', 'c']) {
        expect(logOf(c, n)).not.toMatch(/peer refused this node/);
        expect(formatOf(c, n)).toBe('1');
      }
      // A downgrade: this release wrote no newer format, so the previous one starts on its directory and rejoins.
      step();
      await restart(c, 'c', OLD_BIN);
      await raftHealthy(c);
      expect((await status(c, 'c')).version).toBe(PREVIOUS.version);
      await linksAt(c, ['a', 'c'], 2);
      await linksAt(c, ['a', 'b'], 3);
      await sleep(2_000);
    });
  });

  it('priority, --sync-standbys 1: the standbys, then the active (hand-off to an upgraded standby, hand-back at version 3), then one rolled back', async () => {
    const c = (cluster = await TestCluster.create(['a', 'b', 'c'], { dataDirs: true, extraArgs: ['--sync-standbys', '1'] }));
    for (const n of c.nodes) await c.start(n.name, [], undefined, { bin: OLD_BIN });
    await priorityHealthy(c, 'a');
    await underLoad(c, async (step) => {
      await sleep(2_000);
      for (const name of ['c', 'b']) {
        step();
        await restart(c, name, BIN);
        await priorityHealthy(c, 'a');
        expect((await status(c, name)).version).toBe(CURRENT);
        await sleep(2_000);
      }
      await linksAt(c, ['b', 'c'], 3);
      await linksAt(c, ['a', 'b'], 2);
      // The old active hands off at SIGTERM to b (this release, over a link at 2), and once upgraded gets it back (at 3).
      step();
      await restart(c, 'a', BIN);
      await priorityHealthy(c, 'a');
      expect(logOf(c, 'b')).toMatch(/hand-off from a/);
      expect(logOf(c, 'a')).toMatch(/hand-off from b/);
      await linksAt(c, ['a', 'b', 'c'], 3);
      for (const n of ['a', 'b', 'c']) {
        expect((await status(c, n)).version).toBe(CURRENT);
        expect(logOf(c, n)).not.toMatch(/peer refused this node|refusing a hand-off/);
        expect(formatOf(c, n)).toBe('1');
      }
      await sleep(2_000);
      // A downgrade: the previous release starts on c's directory (its token mark, its member record) and follows again.
      step();
      await restart(c, 'c', OLD_BIN);
      await priorityHealthy(c, 'a');
      expect((await status(c, 'c')).version).toBe(PREVIOUS.version);
      await linksAt(c, ['a', 'c'], 2);
      await sleep(2_000);
    });
  });

  it('a single node: the previous release starts on a data directory this one wrote, and its tokens go on above', async () => {
    const dir = tempDir('ticketing-downgrade-');
    const grant = async (server: RunningServer, key: string): Promise<bigint> => {
      const r = await runCli(['lock', '--addr', server.address, '--lease', '5', key, '--', 'sh', '-c', 'echo "token $TICKETING_TOKEN"'], 15_000);
      expect(r.code, r.stderr).toBe(0);
      const m = /^token (\d+)$/m.exec(r.stdout);
      expect(m, r.stdout).not.toBeNull();
      return BigInt(m![1]!);
    };
    const current = await startServer(['--data-dir', dir]);
    const first = await grant(current, 'downgrade/k');
    expect(await current.stop('SIGTERM')).toBe(0);
    expect(readFileSync(join(dir, 'FORMAT'), 'utf8')).toBe('1\n');
    const old = await startServer(['--data-dir', dir], { bin: OLD_BIN });
    try {
      expect(await grant(old, 'downgrade/k')).toBeGreaterThan(first);
    } finally {
      expect(await old.stop('SIGTERM')).toBe(0);
    }
  });
});
