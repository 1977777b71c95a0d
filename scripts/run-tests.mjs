#!/usr/bin/env node
// `npm test`: every check and every test, in the order that fails fastest.
// Installs missing Debian test dependencies first (needs root or sudo).
// `npm test -- --only 'Node 24'` runs only the steps whose name has that text.
//
// The tests run while a real server holds the defaults (127.0.0.1:5225, its
// admin listener 127.0.0.1:9225 and ./ticketing-data), as on a developer's
// machine that follows the README: a test that binds a default port or uses
// the default data directory fails here. When something already holds 5225
// (your own server), the tests run beside it instead.
import { spawn, spawnSync } from 'node:child_process';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

// Node 24 (the active LTS) runs the unit and black-box tests a second time.
// Not twice: the real-process cluster tests (test/raft, test/cluster: minutes
// of elections and clock-skew runs, nothing runtime-specific that the
// single-node and two-node tests do not also cover), the browser tests (they
// test Chromium and the page, not Node), and test/fence (its SQLite addon is
// compiled for the machine's Node).
const NODE24_TESTS = [
  'packages/checker/test', 'packages/protocol/test', 'packages/server/test',
  'test/protocol', 'test/server', 'test/http', 'test/client', 'test/lock-command',
  'test/security', 'test/verify', 'test/deploy',
];

const steps = [
  ['test dependencies', 'scripts/install-test-deps.sh', []],
  ['build', 'npx', ['tsc', '-b']],
  ['package dependencies (docs/packages.md)', 'node', ['scripts/check-packages.mjs']],
  ['config JSON Schema up to date', 'node', ['scripts/config-schema.mjs', '--check']],
  ['type-check tests', 'npx', ['tsc', '-p', 'tsconfig.tests.json']],
  ['lint', 'npx', ['eslint', '.']],
  ['architecture (import cycles, seams)', 'node', ['scripts/check-architecture.mjs']],
  ['Prometheus rules (promtool)', 'promtool', ['check', 'rules', 'deploy/prometheus/alerts.yml']],
  'hold the defaults',
  ['unit and black-box tests', 'npx', ['vitest', 'run', '--exclude', 'test/browser/**']],
  // Real Raft nodes in one process over a simulated network, disk and clocks, faults injected, safety
  // checked after every event (docs/verify.md). Fixed seed ranges, so a failure replays exactly.
  ['whole-node simulation, 3 nodes (1,000 seeds)', 'node', ['packages/sim/dist/cli.js', '--seeds', '1000', '--from', '1', '--nodes', '3']],
  ['whole-node simulation, 5 nodes (300 seeds)', 'node', ['packages/sim/dist/cli.js', '--seeds', '300', '--from', '100001', '--nodes', '5']],
  // Swarm seeds: each draws its own fault kinds, load and snapshot spacing (packages/sim/src/swarm.ts).
  ['whole-node simulation, swarm, 3 nodes (800 seeds)', 'node', ['packages/sim/dist/cli.js', '--seeds', '800', '--from', '1', '--nodes', '3', '--swarm']],
  ['whole-node simulation, swarm, 5 nodes (200 seeds)', 'node', ['packages/sim/dist/cli.js', '--seeds', '200', '--from', '100001', '--nodes', '5', '--swarm']],
  ['whole-node simulation, priority mode (1,000 seeds)', 'node', ['packages/sim/dist/cli.js', '--seeds', '1000', '--from', '200001', '--mode', 'priority']],
  ['whole-node simulation, priority mode, swarm (500 seeds)', 'node', ['packages/sim/dist/cli.js', '--seeds', '500', '--from', '200001', '--mode', 'priority', '--swarm']],
  // Headless Chromium on its own: it loads the machine, and timing tests should not share it.
  ['browser tests', 'npx', ['vitest', 'run', 'test/browser']],
  ['unit and black-box tests on Node 24', 'npx', ['-y', 'node@24', 'node_modules/vitest/vitest.mjs', 'run', ...NODE24_TESTS]],
  // The JVM client against the binary just built, on JDK 17 and (when installed) Temurin 25.
  ['JVM client (mvn verify)', 'mvn', ['-B', '-q', '-f', 'clients/jvm', 'verify', '-Dticketing.requireServer=true']],
  // The Python client: a venv from PyPI, mypy --strict, pytest (black-box tests use the binary built above).
  ['Python client (mypy --strict, pytest)', 'scripts/python-tests.sh', []],
  'check the defaults are still held',
];

// `--only TEXT`: just the steps whose name contains TEXT (the defaults are still held around tests).
const onlyAt = process.argv.indexOf('--only');
const only = onlyAt > 0 ? process.argv[onlyAt + 1] : undefined;
const chosen = only === undefined ? steps : steps.filter((s) => typeof s === 'string' || s[0].includes(only));

let held;
const started = Date.now();
for (const step of chosen) {
  if (step === 'hold the defaults') {
    held = await holdDefaults();
    continue;
  }
  if (step === 'check the defaults are still held') {
    try {
      await held?.stop();
    } catch (err) {
      console.error(`\n=== ${err.message}`);
      process.exit(1);
    }
    continue;
  }
  const [name, cmd, args] = step;
  const t0 = Date.now();
  console.log(`\n=== ${name}`);
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) {
    console.error(`\n=== ${name} FAILED (exit ${r.status ?? r.signal ?? r.error?.message})`);
    await held?.stop().catch(() => {});
    process.exit(r.status ?? 1);
  }
  console.log(`=== ${name} passed in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}
console.log(`\n=== all passed in ${((Date.now() - started) / 60_000).toFixed(1)} min`);

/** Is something accepting connections on 127.0.0.1:`port`? */
async function listening(port) {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/**
 * Starts `bin/ticketing server` with no flags (5225, 9225, ./ticketing-data)
 * unless 5225 is taken already. `stop` fails if that server died meanwhile:
 * something in the tests took what it held.
 */
async function holdDefaults() {
  console.log('\n=== a server on the defaults (127.0.0.1:5225, 127.0.0.1:9225, ./ticketing-data) while the tests run');
  if (await listening(5225)) {
    console.log('127.0.0.1:5225 is taken already (your own server?): the tests run beside it');
    return undefined;
  }
  const proc = spawn(process.execPath, ['bin/ticketing', 'server'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve(code ?? signal)));
  const ready = await new Promise((resolve) => {
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      if (out.includes('\n')) resolve(out.slice(0, out.indexOf('\n')));
    });
    void exited.then(() => resolve(undefined));
  });
  if (ready === undefined || !/ listen=127\.0\.0\.1:5225( |$)/.test(ready)) {
    console.error(`the default server did not start on 127.0.0.1:5225 (is ./ticketing-data in use?): ${ready ?? 'it exited'}\n${stderr}`);
    proc.kill('SIGKILL');
    process.exit(1);
  }
  console.log(ready);
  if (!ready.endsWith(' http=127.0.0.1:9225')) {
    // Something else has 9225 (the node said so on stderr): the tests still run, but say it.
    console.warn('127.0.0.1:9225 is taken by something else: the default server runs without its admin listener');
    return stopper(proc, exited, () => stderr);
  }
  // The README's promise: with a server on the defaults, `ticketing status` needs no flags.
  const status = spawnSync(process.execPath, ['bin/ticketing', 'status'], { cwd: root, encoding: 'utf8' });
  if (status.status !== 0 || !/^\S+ +single +127\.0\.0\.1:5225 /m.test(status.stdout)) {
    console.error(`\`ticketing status\` with no flags did not show the default server:\n${status.stdout}${status.stderr}`);
    proc.kill('SIGKILL');
    process.exit(1);
  }
  console.log(status.stdout.trimEnd());
  return stopper(proc, exited, () => stderr);
}

/** Stops the default server; throws if it died during the tests (something took what it held). */
function stopper(proc, exited, stderr) {
  let dead = false;
  void exited.then(() => (dead = true));
  return {
    async stop() {
      if (dead) throw new Error(`the default server exited during the tests:\n${stderr()}`);
      proc.kill('SIGTERM');
      const code = await exited;
      if (code !== 0) throw new Error(`the default server exited ${code} on SIGTERM:\n${stderr()}`);
      console.log('=== the default server held its addresses and ./ticketing-data throughout');
    },
  };
}
