// Test counts from each runner's own report, for npm test's summary: vitest's JSON reporter,
// JUnit XML (Maven Surefire, pytest --junitxml), and the simulator's closing line. Each returns
// { runner, total, passed, failed, skipped: [names] }, or { error } when the report says
// something is wrong that the exit code may not (no test at all, a missing report).
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/** vitest --reporter=json: skipped, pending and todo tests all count as skipped. */
export function vitestCounts(file, root) {
  if (!existsSync(file)) return { error: `no vitest report at ${file}` };
  const r = JSON.parse(readFileSync(file, 'utf8'));
  const skipped = [];
  for (const f of r.testResults) {
    for (const t of f.assertionResults) {
      if (t.status !== 'passed' && t.status !== 'failed') skipped.push(`${relative(root, f.name)} > ${t.fullName}`);
    }
  }
  return nonEmpty({ runner: 'vitest', total: r.numTotalTests, passed: r.numPassedTests, failed: r.numFailedTests, skipped });
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
  for (const file of files) {
    const xml = readFileSync(file, 'utf8');
    // One <testcase ...> element each, self-closed or with a body (<failure>, <error>, <skipped>, output).
    for (const m of xml.matchAll(/<testcase\b([^>]*?)(?:\/>|>([\s\S]*?)<\/testcase>)/g)) {
      total++;
      const attr = (name) => new RegExp(`\\b${name}="([^"]*)"`).exec(m[1])?.[1] ?? '';
      const body = m[2] ?? '';
      if (/<(failure|error)\b/.test(body)) failed++;
      else if (/<skipped\b/.test(body)) skipped.push(`${unescape(attr('classname'))} > ${unescape(attr('name'))}${suite(file)}`);
    }
  }
  return nonEmpty({ runner, total, passed: total - failed - skipped.length, failed, skipped });
}

/** Surefire's second run (on another JVM) writes to its own folder: name it in skipped tests. */
function suite(file) {
  const dir = file.split('/').at(-2);
  return dir === 'surefire-reports' || dir === undefined || file.endsWith('.xml') === false ? '' : dir.startsWith('surefire-reports-') ? ` (${dir.slice('surefire-reports-'.length)})` : '';
}

function unescape(s) {
  return s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&apos;/g, "'").replace(/&amp;/g, '&');
}

/** `npm run sim`'s closing line: "N seed(s) from S, K nodes: all passed|F failed; I inconclusive ...". */
export function simCounts(output) {
  const m = /^(\d+) (?:swarm )?seed\(s\) from \d+, \d+ nodes: (?:all passed|(\d+) failed); (\d+) inconclusive/m.exec(output);
  if (m === null) return { error: 'the simulator printed no closing line' };
  const total = Number(m[1]);
  const failed = Number(m[2] ?? 0);
  return nonEmpty({ runner: 'sim seeds', total, passed: total - failed, failed, skipped: [], inconclusive: Number(m[3]) });
}

/** A runner that ran no test passed nothing: that is a failure, not a pass. */
function nonEmpty(c) {
  return c.total === 0 ? { ...c, error: `${c.runner} ran no test` } : c;
}
