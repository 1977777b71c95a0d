// Test counts from each runner's own report, for npm test's summary: vitest's JSON reporter,
// JUnit XML (Maven Surefire, pytest --junitxml), and the simulator's output. Each returns
// { runner, total, passed, failed, skipped: [names], failures: [what failed, one line each] },
// or { error } when the report says something is wrong that the exit code may not (no test at
// all, a missing report). The summary prints the failures last, where a CI log's tail shows them.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { stripVTControlCharacters } from 'node:util';

/** vitest --reporter=json: skipped, pending and todo tests all count as skipped. */
export function vitestCounts(file, root) {
  if (!existsSync(file)) return { error: `no vitest report at ${file}` };
  const r = JSON.parse(readFileSync(file, 'utf8'));
  const skipped = [];
  const failures = [];
  for (const f of r.testResults) {
    const file = relative(root, f.name);
    for (const t of f.assertionResults) {
      if (t.status === 'failed') failures.push(`${file} > ${t.fullName}: ${firstLine(t.failureMessages?.[0])}`);
      else if (t.status !== 'passed') skipped.push(`${file} > ${t.fullName}`);
    }
    // A file that failed outside its tests (an import, a hook) has no failed test to name.
    if (f.status === 'failed' && !f.assertionResults.some((t) => t.status === 'failed')) failures.push(`${file}: ${firstLine(f.message)}`);
  }
  return nonEmpty({ runner: 'vitest', total: r.numTotalTests, passed: r.numPassedTests, failed: r.numFailedTests, skipped, failures });
}

/** Every JUnit XML report in `paths`: a file (pytest's), or a folder of Surefire's TEST-*.xml. */
export function junitCounts(runner, paths) {
  const files = paths.flatMap((p) => {
    if (!existsSync(p)) return [];
    return statSync(p).isFile() ? [p] : readdirSync(p).filter((f) => /^TEST-.*\.xml$/.test(f)).map((f) => join(p, f));
  });
  if (files.length === 0) return { error: `no JUnit XML report in ${paths.join(', ')}` };
  let total = 0;
  let failed = 0;
  const skipped = [];
  const failures = [];
  for (const file of files) {
    const xml = readFileSync(file, 'utf8');
    // One <testcase ...> element each, self-closed or with a body (<failure>, <error>, <skipped>, output).
    for (const m of xml.matchAll(/<testcase\b([^>]*?)(?:\/>|>([\s\S]*?)<\/testcase>)/g)) {
      total++;
      const attr = (name) => new RegExp(`\\b${name}="([^"]*)"`).exec(m[1])?.[1] ?? '';
      const body = m[2] ?? '';
      const failure = /<(?:failure|error)\b([^>]*)/.exec(body);
      if (failure !== null) {
        failed++;
        const message = /\bmessage="([^"]*)"/.exec(failure[1])?.[1] ?? '';
        failures.push(`${unescape(attr('classname'))} > ${unescape(attr('name'))}${suite(file)}: ${firstLine(unescape(message))}`);
      }
      else if (/<skipped\b/.test(body)) skipped.push(`${unescape(attr('classname'))} > ${unescape(attr('name'))}${suite(file)}`);
    }
  }
  return nonEmpty({ runner, total, passed: total - failed - skipped.length, failed, skipped, failures });
}

/** Surefire's second run (on another JVM) writes to its own folder: name it in skipped tests. */
function suite(file) {
  const dir = file.split('/').at(-2);
  return dir === 'surefire-reports' || dir === undefined || file.endsWith('.xml') === false ? '' : dir.startsWith('surefire-reports-') ? ` (${dir.slice('surefire-reports-'.length)})` : '';
}

function unescape(s) {
  return s.replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n))).replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&apos;/g, "'").replace(/&amp;/g, '&');
}

/** `npm run sim`'s closing line: "N seed(s) from S, K nodes: all passed|F failed; I inconclusive ...". */
export function simCounts(output) {
  const m = /^(\d+) (?:swarm )?seed\(s\) from \d+, \d+ nodes: (?:all passed|(\d+) failed); (\d+) inconclusive/m.exec(output);
  if (m === null) return { error: 'the simulator printed no closing line' };
  const total = Number(m[1]);
  const failed = Number(m[2] ?? 0);
  // Each failed seed: its line, the reason below it (after a swarm seed's profile), and the replay command after its trace.
  const failures = [];
  const lines = output.split('\n');
  lines.forEach((line, i) => {
    if (!/^seed \d+: FAILED/.test(line)) return;
    const replay = lines.slice(i + 1).find((l) => l.startsWith('replay: ')) ?? '';
    const reason = lines.slice(i + 1).find((l) => !l.startsWith('swarm profile: '));
    failures.push(`${line}: ${firstLine(reason)}; ${replay}`);
  });
  return nonEmpty({ runner: 'sim seeds', total, passed: total - failed, failed, skipped: [], failures, inconclusive: Number(m[3]) });
}

/** A failure message's first line, kept short enough for a summary line. */
function firstLine(text) {
  const line = String(text ?? '').split('\n').find((l) => l.trim() !== '') ?? '';
  // ANSI colours of the reporters, out.
  const plain = stripVTControlCharacters(line).trim();
  return plain.length > 300 ? `${plain.slice(0, 300)}...` : plain;
}

/** A runner that ran no test passed nothing: that is a failure, not a pass. */
function nonEmpty(c) {
  return c.total === 0 ? { ...c, error: `${c.runner} ran no test` } : c;
}
