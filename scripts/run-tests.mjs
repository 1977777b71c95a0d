#!/usr/bin/env node
// `npm test`: every check and every test. What runs is scripts/test-steps.mjs; this file is how:
//
//   1. the versions of every runtime and tool the run uses;
//   2. the quick checks (build, lint, ...), one after another, stopping at the first failure;
//   3. a real server on the defaults (127.0.0.1:5225, 127.0.0.1:9225, ./ticketing-data), as on a
//      developer's machine that follows the README: a test that binds a default port or uses the
//      default data directory breaks it, and the run fails. If a Ticketing server already holds
//      5225 (your own), the tests run beside it; anything else on 5225 or 9225 fails the run;
//   4. the lanes, side by side (one per core); the steps of one lane one after another, all of
//      them even after a failure. Each step has a timeout, its output goes to a log (printed whole
//      when the step ends), and its time and test counts are printed;
//   5. the totals: tests per runner, skipped tests (any not in the reviewed list fails the run),
//      and the time.
//
//   npm test -- --only 'Node 24'    just the steps whose name contains that text (and the checks
//                                   they need: the build); --list shows the steps
//   npm test -- --no-checks         skip step 2 (after a build of your own)
// Installs nothing: `npm run setup` does (scripts/setup.mjs); a missing runtime fails the run.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { allowedSkips, checks, lanes, versions } from './test-steps.mjs';
import { missingRuntimes } from './runtimes.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const argv = process.argv.slice(2);
const onlyAt = argv.indexOf('--only');
const only = onlyAt >= 0 ? argv[onlyAt + 1] : undefined;
const logDir = mkdtempSync(join(tmpdir(), 'ticketing-test-logs-'));
const started = Date.now();
const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;

if (argv.includes('--list')) {
  for (const s of checks) console.log(`check: ${s.name}`);
  for (const [lane, steps] of Object.entries(lanes)) for (const s of steps) console.log(`${lane}: ${s.name} (timeout ${s.timeoutS} s)`);
  process.exit(0);
}

const chosenLanes = Object.entries(lanes)
  .map(([lane, steps]) => [lane, steps.filter((s) => only === undefined || s.name.includes(only))])
  .filter(([, steps]) => steps.length > 0);
const chosenChecks = argv.includes('--no-checks') ? [] : only === undefined ? checks : checks.filter((s) => s.name === 'build' || s.name.includes(only));

const missing = missingRuntimes();
if (missing.length > 0 && chosenLanes.some(([, steps]) => steps.some((s) => s.needsSetup))) {
  console.error(`missing ${missing.join(', ')}: run npm run setup`);
  process.exit(1);
}

console.log('=== versions');
for (const [what, cmd, args] of versions()) {
  const r = spawnSync(cmd, args, { cwd: root, encoding: 'utf8' });
  const out = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim().split('\n')[0] ?? '';
  console.log(`${what.padEnd(22)} ${r.status === 0 && out !== '' ? out : `NOT AVAILABLE (${cmd} ${args.join(' ')}: ${r.error?.message ?? out})`}`);
}
console.log(`${'machine'.padEnd(22)} ${spawnSync('nproc', { encoding: 'utf8' }).stdout.trim()} cores, load ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);

// Randomised tests (fuzzers, properties) draw from one seed, from the commit: a rerun replays them,
// the next commit tries other inputs. The simulator's fresh seeds follow the commit the same way.
const commit = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8' }).stdout?.trim() ?? '';
process.env.TEST_SEED ??= /^[0-9a-f]{8}/.test(commit) ? String(Number.parseInt(commit.slice(0, 8), 16) % 2 ** 31) : String(Math.floor(Math.random() * 2 ** 31));
console.log(`${'test seed'.padEnd(22)} ${process.env.TEST_SEED}${commit === '' ? '' : ` (from commit ${commit.slice(0, 12)})`}: TEST_SEED=${process.env.TEST_SEED} npm test replays the fuzzers and property tests`);

/** Everything the run did, for the summary. */
const results = [];
const running = new Set();
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    for (const child of running) killGroup(child);
    process.exit(130);
  });
}

for (const step of chosenChecks) {
  const r = await runStep(step, 'checks');
  if (!r.ok) finish(1);
}

let held;
try {
  held = await holdDefaults();
} catch (err) {
  console.error(`\n=== ${err.message}`);
  finish(1);
}
const laneResults = await Promise.all(chosenLanes.map(async ([lane, steps]) => runLane(lane, steps)));
let ok = laneResults.every(Boolean);
try {
  await held?.stop();
} catch (err) {
  console.error(`\n=== ${err.message}`);
  ok = false;
}
finish(ok ? 0 : 1);

/** Runs a lane's steps in order; a failed step fails the run, but the lane goes on (one run says everything that fails). */
async function runLane(lane, steps) {
  let ok = true;
  for (const step of steps) ok = (await runStep(step, lane)).ok && ok;
  return ok;
}

/** One step: spawned in its own process group, logged to a file, killed at its timeout. */
async function runStep(step, lane) {
  const slug = step.name.replace(/[^a-z0-9]+/gi, '-').toLowerCase();
  const log = join(logDir, `${slug}.log`);
  const report = join(logDir, `${slug}.report`);
  const { cmd, args, env } = step.command({ report, root });
  // Its own temporary directory: what the tests leave there is counted, then removed.
  // A short path (PostgreSQL's socket path inside it must stay under 108 bytes), open as /tmp is
  // (the fencing tests run PostgreSQL as its own user inside it).
  const tmp = mkdtempSync(join(tmpdir(), 'tt-'));
  chmodSync(tmp, 0o1777);
  const t0 = Date.now();
  console.log(`\n=== [${lane}] ${step.name}: started (timeout ${step.timeoutS} s)`);
  const fd = openSync(log, 'w');
  const child = spawn(cmd, args, {
    cwd: root,
    stdio: ['ignore', fd, fd],
    detached: true,
    env: { ...process.env, TMPDIR: tmp, JAVA_TOOL_OPTIONS: `-Djava.io.tmpdir=${tmp}`, ...env },
  });
  closeSync(fd);
  running.add(child);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup(child);
  }, step.timeoutS * 1000);
  const code = await new Promise((resolve) => {
    child.once('error', (err) => resolve(err.message));
    child.once('exit', (c, signal) => resolve(c ?? signal));
  });
  clearTimeout(timer);
  running.delete(child);
  killGroup(child); // whatever the step left running (servers of a killed test run)
  const ms = Date.now() - t0;
  const output = readFileSync(log, 'utf8').replace(/^Picked up JAVA_TOOL_OPTIONS: .*\n/gm, '');
  const leftovers = readdirSync(tmp);
  rmSync(tmp, { recursive: true, force: true });
  let counts;
  try {
    counts = step.counts?.({ report, output, root });
  } catch (err) {
    counts = { error: `its test report could not be read: ${err.message}` };
  }
  const ok = code === 0 && !timedOut && counts?.error === undefined;
  const why = [timedOut ? `timed out after ${step.timeoutS} s` : code !== 0 ? `exit ${code}` : undefined, counts?.error].filter(Boolean).join('; ');
  const result = { step, lane, ok, ms, counts, why };
  results.push(result);
  console.log(`\n=== [${lane}] ${step.name}: output (${log})\n${output.trimEnd()}`);
  if (leftovers.length > 0) console.log(`=== [${lane}] ${step.name}: left ${leftovers.length} temporary file(s) behind (removed now): ${leftovers.slice(0, 10).join(' ')}`);
  console.log(`=== [${lane}] ${step.name}: ${ok ? 'passed' : `FAILED (${result.why})`} in ${seconds(ms)}${counts?.total === undefined ? '' : `, ${countLine(counts)}`}`);
  return result;
}

function killGroup(child) {
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // the group is gone already
  }
}

function countLine(c) {
  return `${c.runner}: ${c.passed} passed, ${c.failed} failed, ${c.skipped.length} skipped`;
}

/** The summary: every step, counts per runner, skips against the reviewed list, the total time. */
function finish(code) {
  console.log('\n=== summary');
  for (const r of results) {
    const state = r.ok ? 'ok' : `FAILED (${r.why})`;
    console.log(`${r.lane.padEnd(12)} ${seconds(r.ms).padStart(8)}  ${state.padEnd(8)} ${r.step.name}${r.counts?.total === undefined ? '' : `  [${countLine(r.counts)}]`}`);
  }
  const perRunner = new Map();
  const skipped = [];
  for (const r of results) {
    if (r.counts?.total === undefined) continue;
    const t = perRunner.get(r.counts.runner) ?? { passed: 0, failed: 0, skipped: 0 };
    t.passed += r.counts.passed;
    t.failed += r.counts.failed;
    t.skipped += r.counts.skipped.length;
    perRunner.set(r.counts.runner, t);
    for (const name of r.counts.skipped) skipped.push({ runner: r.counts.runner, step: r.step.name, name });
  }
  console.log('\n=== tests per runner');
  for (const [runner, t] of perRunner) console.log(`${runner.padEnd(12)} ${t.passed} passed, ${t.failed} failed, ${t.skipped} skipped`);

  console.log('\n=== skipped tests (allowed only when listed, with why, in scripts/test-steps.mjs)');
  const used = new Set();
  let unreviewed = 0;
  for (const s of skipped) {
    const allowed = allowedSkips.find((a) => a.runner === s.runner && a.test.test(s.name));
    if (allowed !== undefined) used.add(allowed);
    else unreviewed++;
    console.log(`${allowed === undefined ? 'NOT ALLOWED' : 'allowed    '} ${s.runner}: ${s.name}${allowed === undefined ? ` (in ${s.step})` : `: ${allowed.why}`}`);
  }
  if (skipped.length === 0) console.log('none');
  console.log(`reviewed list: ${allowedSkips.length === 0 ? '(empty)' : allowedSkips.map((a) => `${a.runner} ${a.test}: ${a.why}${used.has(a) ? '' : ' (not used this run)'}`).join('; ')}`);
  if (unreviewed > 0) {
    console.log(`=== ${unreviewed} skipped test(s) not in the reviewed list: a skip is a test that did not run`);
    code = 1;
  }
  const failures = results.flatMap((r) => (r.ok ? [] : [`${r.step.name}: ${r.why}`, ...(r.counts?.failures ?? []).map((f) => `  ${f}`)]));
  if (failures.length > 0) {
    console.log('\n=== what failed (each step, then its failed tests; the step\'s output above has the rest)');
    for (const line of failures.slice(0, 60)) console.log(line);
    if (failures.length > 60) console.log(`... and ${failures.length - 60} more`);
  }
  const totals = [...perRunner.values()].reduce((a, t) => ({ passed: a.passed + t.passed, failed: a.failed + t.failed, skipped: a.skipped + t.skipped }), { passed: 0, failed: 0, skipped: 0 });
  const failedSteps = results.filter((r) => !r.ok).length;
  if (failedSteps > 0) code = 1;
  const stepTime = results.reduce((a, r) => a + r.ms, 0);
  console.log(`\n=== ${code === 0 ? 'all passed' : `FAILED (${failedSteps} step(s))`} in ${((Date.now() - started) / 60_000).toFixed(1)} min (${(stepTime / 60_000).toFixed(1)} min of steps in ${chosenLanes.length} lanes); logs in ${logDir}`);
  console.log(`total: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
  if (code === 0 && process.env.KEEP_TEST_LOGS === undefined) rmSync(logDir, { recursive: true, force: true });
  process.exit(code);
}

/** Is something accepting connections on 127.0.0.1:`port`? With `probe`, the first line it answers to it. */
async function ask(port, probe) {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let reply = '';
    const done = (v) => {
      s.destroy();
      resolve(v);
    };
    s.setTimeout(2_000, () => done(probe === undefined ? true : reply));
    s.once('connect', () => (probe === undefined ? done(true) : s.write(probe)));
    s.on('data', (d) => {
      reply += d;
      if (reply.includes('\n')) done(reply.slice(0, reply.indexOf('\n')));
    });
    s.once('error', () => done(probe === undefined ? false : undefined));
  });
}

/**
 * Starts `bin/ticketing server` with no flags (5225, 9225, ./ticketing-data), or runs beside a
 * Ticketing server that holds 5225 already. `stop` throws if the server died or stopped answering
 * meanwhile: something in the tests took what it held.
 */
async function holdDefaults() {
  console.log('\n=== a server on the defaults (127.0.0.1:5225, 127.0.0.1:9225, ./ticketing-data) while the tests run');
  const answer = await ask(5225, 'P\n');
  if (answer === 'P') {
    console.log('127.0.0.1:5225 is a Ticketing server already (your own?): the tests run beside it, and it must still answer at the end');
    return {
      async stop() {
        if ((await ask(5225, 'P\n')) !== 'P') throw new Error('the Ticketing server on 127.0.0.1:5225 stopped answering during the tests');
        console.log('=== the server on 127.0.0.1:5225 still answers');
      },
    };
  }
  if (answer !== undefined) throw new Error(`127.0.0.1:5225 is taken by something that is not a Ticketing server (it answered ${JSON.stringify(answer)} to P): the default-address checks cannot run`);
  if (await ask(9225)) throw new Error('127.0.0.1:9225 is taken by something else: the default server could not have its admin listener, so `ticketing status` with no flags cannot be checked');
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
  if (ready === undefined || !/ listen=127\.0\.0\.1:5225 http=127\.0\.0\.1:9225( |$)/.test(ready)) {
    proc.kill('SIGKILL');
    throw new Error(`the default server did not start on 127.0.0.1:5225 with its admin listener on 127.0.0.1:9225 (is ./ticketing-data in use?): ${ready ?? 'it exited'}\n${stderr}`);
  }
  console.log(ready);
  // The README's promise: with a server on the defaults, `ticketing status` needs no flags.
  const status = spawnSync(process.execPath, ['bin/ticketing', 'status'], { cwd: root, encoding: 'utf8' });
  if (status.status !== 0 || !/^\S+ +single +127\.0\.0\.1:5225 /m.test(status.stdout)) {
    proc.kill('SIGKILL');
    throw new Error(`\`ticketing status\` with no flags did not show the default server:\n${status.stdout}${status.stderr}`);
  }
  console.log(status.stdout.trimEnd());
  let dead = false;
  void exited.then(() => (dead = true));
  return {
    async stop() {
      if (dead) throw new Error(`the default server exited during the tests:\n${stderr}`);
      proc.kill('SIGTERM');
      const code = await exited;
      if (code !== 0) throw new Error(`the default server exited ${code} on SIGTERM:\n${stderr}`);
      console.log('=== the default server held its addresses and ./ticketing-data throughout');
    },
  };
}
