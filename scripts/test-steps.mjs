// What `npm test` runs (scripts/run-tests.mjs is how). Adding a step is one line in a lane:
//
//   step('packaging smoke test', 180, 'node', ['scripts/pack-smoke.mjs']),
//
// (name, timeout in seconds, command, arguments; the command runs in the repository root and
// must exit 0). A timeout catches a hang, not slowness: give several times the step's time on a
// loaded machine (a shared 2-core machine runs lint in minutes). Steps that run tests use the helpers below, so their counts are reported and
// their skips checked: vitest(...), sim(...), or step(..., { counts }). A new lane is one more
// key in `lanes`; lanes run side by side, so keep them about equally long (each step prints
// its time) and keep the busy lanes at the number of cores (the long lane mostly waits).
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { java25Home, nodeBinary, NODE_RUNTIMES } from './runtimes.mjs';
import { junitCounts, simCounts, vitestCounts } from './test-reports.mjs';

/** Any command. `counts({ report, output, root })` reads its test counts; `report` is a file path the step may write. */
export function step(name, timeoutS, cmd, args = [], { env = {}, counts, needsSetup = false, before } = {}) {
  return {
    name,
    timeoutS,
    needsSetup,
    counts,
    command: (ctx) => {
      before?.(ctx);
      return { cmd, args: typeof args === 'function' ? args(ctx) : args, env: typeof env === 'function' ? env(ctx) : env };
    },
  };
}

/**
 * vitest over `args` (files, folders, --exclude ...), on the machine's Node or a pinned major (22, 24).
 * `needsSetup`: the tests use something `npm run setup` installs (a pinned Node always is).
 */
export function vitest(name, timeoutS, args, { node, env = {}, needsSetup = false } = {}) {
  return step(name, timeoutS, node === undefined ? process.execPath : nodeBinary(node), ({ report }) => [
    'node_modules/vitest/vitest.mjs', 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${report}`, ...args,
  ], { env, counts: ({ report, root }) => vitestCounts(report, root), needsSetup: needsSetup || node !== undefined });
}

/**
 * `count` fresh seeds of the whole-node simulator: a window that moves with each commit
 * (packages/sim/src/fresh-seeds.ts), printed with the command that replays it. The seeds that
 * found defects run in packages/sim/test/regressions.test.ts; long ranges are `npm run soak`.
 */
export function sim(name, timeoutS, count, ...args) {
  return step(`whole-node simulation, ${name} (${count} fresh seeds)`, timeoutS, 'node', ['packages/sim/dist/cli.js', '--fresh', String(count), ...args], {
    counts: ({ output }) => simCounts(output),
  });
}

/**
 * The CPU-bound seeded searches among the vitest files: they run in the simulation lane, so the
 * black-box lane keeps its timing tests away from a busy core of its own.
 */
const SEARCHES = [
  'packages/server/test/raft/simulation.test.ts', // the Raft core under a seeded network
  'packages/sim/test/regressions.test.ts', // the whole-node simulator's pinned seeds
  'packages/sim/test/check-budget.test.ts', // its history check's step budget
  'test/security/fuzz.test.ts', // a million request lines
  'packages/server/test/peer-fuzz.test.ts', // the peer protocol fuzzer
  'packages/checker/test/properties.test.ts', // the checker against a brute-force oracle
];

/**
 * The real-process cluster tests: minutes of elections and failover timeouts, little CPU. They
 * run in the long lane, beside the single-node black-box tests rather than after them. With them
 * test/upgrade: a cluster of the previous release (setup builds it) rolled forward under load.
 */
// Files, not folders: vitest matches a filter anywhere in a path, so 'test/raft/' would take
// packages/server/test/raft/ too (its units, and a seeded search that already runs above).
const CLUSTER_TESTS = [...testFilesIn('test/cluster'), ...testFilesIn('test/raft'), 'test/verify/cluster.test.ts', 'test/verify/verify-raft.test.ts', 'test/client/cluster.test.ts', ...testFilesIn('test/upgrade')];
function testFilesIn(dir) {
  return readdirSync(dir).filter((f) => f.endsWith('.test.ts')).sort().map((f) => `${dir}/${f}`);
}
const excluded = (paths) => paths.flatMap((p) => ['--exclude', p.endsWith('/') ? `${p}**` : p]);

/**
 * Tests that depend on the runtime, run again on each pinned Node (the whole suite runs on the
 * machine's Node): the codec, the server's units, and the single-node black-box tests (sockets,
 * TLS, HTTP, child processes, the CLI). Not again: the real-process cluster tests above
 * (nothing runtime-specific the single-node tests miss), the browser tests (Chromium), test/fence (its
 * SQLite addon is built for the machine's Node), test/deploy (config files and promtool), and
 * the seeded searches above (same code, same seeds, a JIT that does not change their result).
 */
const RUNTIME_TESTS = [
  'packages/protocol/test/', 'packages/client/test/', 'packages/checker/test/', 'packages/server/test/',
  'test/protocol/', 'test/server/', 'test/http/', 'test/client/', 'test/lock-command/', 'test/security/', 'test/verify/', 'test/cli/',
  ...excluded([...CLUSTER_TESTS, 'packages/checker/test/performance.test.ts', ...SEARCHES]),
];

const MIN = 60;
// Each module of the JVM build (the client, the Spring adapter) writes its own reports, once per JDK.
const JVM_REPORTS = ['client', 'spring'].flatMap((m) => [`clients/jvm/${m}/target/surefire-reports`, `clients/jvm/${m}/target/surefire-reports-jdk25`]);

/** Quick checks, in order, before any test: the first failure stops the run. */
export const checks = [
  step('build', 10 * MIN, 'npx', ['tsc', '-b']),
  step('package dependencies (docs/packages.md)', 3 * MIN, 'node', ['scripts/check-packages.mjs']),
  step('config JSON Schema up to date', 3 * MIN, 'node', ['scripts/config-schema.mjs', '--check']),
  step('type-check tests', 10 * MIN, 'npx', ['tsc', '-p', 'tsconfig.tests.json']),
  step('lint', 10 * MIN, 'npx', ['eslint', '.']),
  step('architecture (import cycles, seams)', 3 * MIN, 'node', ['scripts/check-architecture.mjs']),
  step('Prometheus rules (promtool)', 3 * MIN, 'promtool', ['check', 'rules', 'deploy/prometheus/alerts.yml']),
];

/** The lanes, side by side; each lane's steps one after another. */
export const lanes = {
  // Real single-node servers over real TCP (timing tests: one file at a time), then the browser and JVM tests.
  'black-box': [
    vitest('unit and black-box tests', 40 * MIN, excluded(['test/browser/', ...CLUSTER_TESTS, ...SEARCHES])),
    // Headless Chromium after the timing tests, not beside them.
    vitest('browser tests', 10 * MIN, ['test/browser']),
    // The JVM client against the binary just built, on JDK 17 and again on the Java 25 runtime setup installed.
    // No javadoc jars here (-Ddokka.skip): the JVM package smoke test below builds and checks them.
    step('JVM client (mvn verify, JDK 17 and Java 25)', 25 * MIN, 'mvn', () => ['-B', '-q', '-f', 'clients/jvm', 'verify', '-Ddokka.skip=true', '-Dticketing.requireServer=true', `-Djdk25.home=${java25Home()}`], {
      needsSetup: true,
      before: ({ root }) => JVM_REPORTS.forEach((d) => rmSync(join(root, d), { recursive: true, force: true })),
      counts: ({ root }) => junitCounts('junit', JVM_REPORTS.map((d) => join(root, d))),
    }),
    // After the JVM tests, never beside them: both build in clients/jvm/*/target.
    // The JVM artifacts (jar, sources, javadoc, pom metadata) installed into a fresh Kotlin 1.9 / Java 17 project.
    step('JVM client package (mvn install, a fresh project against a real server)', 15 * MIN, 'bash', ['scripts/package-smoke-jvm.sh']),
  ],
  // CPU-bound, one core: seeded searches, then the pinned runtimes.
  simulation: [
    vitest('seeded searches (Raft core simulation, simulator regressions, fuzzers, checker properties)', 25 * MIN, SEARCHES),
    // Real Raft and priority nodes in one process over a simulated network, disk and clocks (docs/verify.md).
    // --require-coverage: fails when a rare path (multi-chunk snapshot, each membership step, transfer, hand-over at SIGTERM) was never reached.
    sim('3 nodes', 15 * MIN, 300, '--nodes', '3', '--require-coverage'),
    sim('5 nodes', 15 * MIN, 60, '--nodes', '5'),
    // Swarm seeds: each draws its own fault kinds, load and snapshot spacing (packages/sim/src/swarm.ts).
    sim('swarm, 3 nodes', 15 * MIN, 150, '--nodes', '3', '--swarm'),
    sim('swarm, 5 nodes', 15 * MIN, 40, '--nodes', '5', '--swarm'),
    sim('priority mode', 10 * MIN, 300, '--mode', 'priority'),
    sim('priority mode, swarm', 10 * MIN, 150, '--mode', 'priority', '--swarm'),
    // Five nodes: a blocker three candidates share (a fourth node's clock) only exists there.
    sim('priority mode, 5 nodes', 10 * MIN, 60, '--mode', 'priority', '--nodes', '5'),
    // Calm faults leave windows with one failure, where the loss table admits no loss at all.
    sim('priority mode, calm faults', 10 * MIN, 150, '--mode', 'priority', '--fault-gap', '2000', '--duration', '8000'),
    // Pauses that stop the monotonic clock too, as an OS suspend does (only the wall clock shows them).
    sim('priority mode, OS suspends', 10 * MIN, 100, '--mode', 'priority', '--os-suspend'),
    // Both pinned Nodes here rather than one in the long lane, which is the longest (CI ran 21 min with
    // Node 22 there: long 19.6 min of steps, simulation 11.7).
    ...NODE_RUNTIMES.map(runtimeTests),
    // The packed client packages installed outside the repository, ESM on this Node and require() on each pinned one.
    step('TypeScript client packages (pack, install, smoke on Node 22 and 24)', 10 * MIN, 'bash', ['scripts/package-smoke-ts.sh'], {
      needsSetup: true,
      env: () => ({ NODES: NODE_RUNTIMES.map((r) => nodeBinary(r.major)).join(' ') }),
    }),
    // What operators install (docs/production.md): the npm package with production dependencies only,
    // the single executable, and the Kubernetes manifests against the API schemas.
    step('npm package smoke (pack, install -g offline, run every command)', 10 * MIN, 'node', ['scripts/smoke/npm.mjs']),
    step('single executable smoke (build the linux-x64 SEA, run it with nothing on the PATH)', 10 * MIN, 'node', ['scripts/smoke/sea.mjs']),
    step('single executable: native addons load', 5 * MIN, 'node', ['scripts/sea/build.mjs', '--check-native-addons']),
    step('Kubernetes manifests (schemas)', 5 * MIN, 'scripts/validate-kubernetes.sh', []),
  ],
  // Real-process tests that mostly wait (little CPU), beside the two busy lanes: minutes of
  // keep-alive under failovers (test/long), the cluster tests, the Python client.
  long: [
    vitest('long real-process tests (test/long, its files side by side)', 25 * MIN, ['--maxWorkers=2', 'test/long/'], { env: { TICKETING_LONG_TESTS: '1' } }),
    // Needs setup: test/upgrade starts nodes of the previous release.
    vitest('real-process cluster tests (priority, Raft, verify, clients, rolling upgrade from the previous release)', 25 * MIN, CLUSTER_TESTS, { needsSetup: true }),
    // The Python client: mypy --strict and pytest in the venv setup made (black-box tests use the binary built above).
    step('Python client (mypy --strict, pytest)', 10 * MIN, 'scripts/python-tests.sh', [], {
      needsSetup: true,
      env: ({ report }) => ({ PY_JUNIT_XML: report }),
      counts: ({ report }) => junitCounts('pytest', [report]),
    }),
    // The Python package built (sdist, wheel) and installed into fresh venvs of its oldest and newest Python.
    step('Python client package (build, install, smoke on 3.10 and 3.13)', 10 * MIN, 'bash', ['scripts/package-smoke-python.sh']),
  ],
};

/** The runtime-dependent tests on one pinned Node (`r` from NODE_RUNTIMES). */
// Two files at a time: they wait on sockets and timers far more than they compute.
function runtimeTests(r) {
  return vitest(`runtime-dependent tests on Node ${r.version}`, 20 * MIN, ['--maxWorkers=2', ...RUNTIME_TESTS], { node: r.major });
}

/**
 * Skipped tests that are reviewed and allowed; any other skip (vitest's skipped, pending or todo,
 * a JUnit or pytest <skipped>) fails the run. Each entry: { runner: 'vitest' | 'junit' | 'pytest',
 * test: a pattern of the name as the summary prints it, why: the reason it may be skipped }.
 * Keep it short; today no test needs a skip.
 */
export const allowedSkips = [];

/** Every runtime and tool the run uses, printed first: [what, command, args]. */
export function versions() {
  return [
    ['node (machine)', process.execPath, ['--version']],
    ...NODE_RUNTIMES.map((r) => [`node ${r.major} (pinned)`, nodeBinary(r.major), ['--version']]),
    ['npm', 'npm', ['--version']],
    ['java (JDK 17)', 'java', ['-version']],
    ['java 25 (setup)', join(java25Home(), 'bin', 'java'), ['-version']],
    ['maven', 'mvn', ['-v']],
    ['python', 'python3', ['--version']],
    ['pytest', 'clients/python/.venv/bin/python', ['-m', 'pytest', '--version']],
    ['mypy', 'clients/python/.venv/bin/python', ['-m', 'mypy', '--version']],
    ['chromium', 'chromium', ['--version']],
    ['redis-server', 'redis-server', ['--version']],
    ['etcd', 'etcd', ['--version']],
    ['postgres', 'sh', ['-c', 'p=$(ls -d /usr/lib/postgresql/*/bin/postgres | sort -V | tail -1) && "$p" --version']],
    ['promtool', 'promtool', ['--version']],
    ['openssl', 'openssl', ['version']],
    ['libfaketime', 'dpkg-query', ['-W', '-f=${Version}', 'libfaketime']],
  ];
}
