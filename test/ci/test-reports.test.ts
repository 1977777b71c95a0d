/**
 * npm test's counts come from each runner's own report (scripts/test-reports.mjs): a skipped
 * test must be seen as skipped, a failure as failed, and a runner that ran nothing as an error.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

interface Counts {
  runner?: string;
  total?: number;
  passed?: number;
  failed?: number;
  skipped?: string[];
  failures?: string[];
  inconclusive?: number;
  error?: string;
}
interface Reports {
  vitestCounts(file: string, root: string): Counts;
  junitCounts(runner: string, paths: string[]): Counts;
  simCounts(output: string): Counts;
}
const reports = (await import(new URL('../../scripts/test-reports.mjs', import.meta.url).href)) as Reports;
const dir = mkdtempSync(join(tmpdir(), 'ticketing-reports-'));

describe('test reports', () => {
  it('vitest: skipped, pending and todo tests count as skipped, by file and name; failures name their test and first message line', () => {
    const file = join(dir, 'vitest.json');
    const test = (fullName: string, status: string, failureMessages: string[] = []) => ({ fullName, status, failureMessages });
    writeFileSync(file, JSON.stringify({
      numTotalTests: 4, numPassedTests: 1, numFailedTests: 1,
      testResults: [
        { name: '/repo/test/a.test.ts', status: 'failed', assertionResults: [test('a ok', 'passed'), test('a bad', 'failed', ['\u001b[31mAssertionError: expected 2 to be 1\u001b[39m\n    at a.test.ts:3']), test('a later', 'todo'), test('a off', 'skipped')] },
        { name: '/repo/test/b.test.ts', status: 'failed', message: 'Failed to load url ./missing.js', assertionResults: [] },
      ],
    }));
    expect(reports.vitestCounts(file, '/repo')).toEqual({
      runner: 'vitest', total: 4, passed: 1, failed: 1,
      skipped: ['test/a.test.ts > a later', 'test/a.test.ts > a off'],
      failures: ['test/a.test.ts > a bad: AssertionError: expected 2 to be 1', 'test/b.test.ts: Failed to load url ./missing.js'],
    });
    expect(reports.vitestCounts(join(dir, 'missing.json'), '/repo').error).toMatch(/no vitest report/);
  });

  it('JUnit XML (Surefire, pytest): failures, errors and skips, in every report of a folder', () => {
    const surefire = join(dir, 'surefire-reports-jdk25');
    const write = (path: string, cases: string) => writeFileSync(path, `<?xml version="1.0"?><testsuite>${cases}</testsuite>`);
    mkdirSync(surefire);
    writeFileSync(join(surefire, 'a.txt'), 'not a report');
    write(join(surefire, 'TEST-a.xml'), '<testcase classname="a.B" name="ok" time="0.1"/><testcase classname="a.B" name="off &amp; why"><skipped message="no"/></testcase>');
    write(join(surefire, 'TEST-b.xml'), '<testcase classname="a.C" name="bad"><failure message="x">trace</failure></testcase><testcase classname="a.C" name="boom"><error/></testcase>');
    expect(reports.junitCounts('junit', [surefire, join(dir, 'absent')])).toEqual({
      runner: 'junit', total: 4, passed: 1, failed: 2, skipped: ['a.B > off & why (jdk25)'], failures: ['a.C > bad (jdk25): x', 'a.C > boom (jdk25): '],
    });
    const pytest = join(dir, 'pytest.report'); // any name: npm test names it after the step
    write(pytest, '<testcase classname="tests.test_server" name="test_fifo"><skipped type="pytest.skip" message="server not built"/></testcase>');
    expect(reports.junitCounts('pytest', [pytest])).toMatchObject({ total: 1, passed: 0, skipped: ['tests.test_server > test_fifo'] });
    write(pytest, '');
    expect(reports.junitCounts('pytest', [pytest]).error).toBe('pytest ran no test');
  });

  it('the simulator: seeds run and failed, and the inconclusive checks, from its closing line; each failed seed with its reason and replay', () => {
    const line = '300 swarm seed(s) from 466760001, 3 nodes: 2 failed; 1 inconclusive history checks (budget 2000000 steps per key, the most a seed took: 70); 1 events in 1.0 s (1 events/s)';
    const failed = (seed: number, why: string) => `seed ${seed}: FAILED (10 events)\nswarm profile: faults kill\n${why}\nlast events:\n1.000 n1: timer\nreplay: npm run sim -- --seed ${seed} --swarm --trace 300\n`;
    expect(reports.simCounts(`fresh seeds ...\n${failed(7, 'tokens: a smaller token')}${failed(9, 'liveness: none')}${line}\n`)).toEqual({
      runner: 'sim seeds', total: 300, passed: 298, failed: 2, skipped: [], inconclusive: 1,
      failures: [
        'seed 7: FAILED (10 events): tokens: a smaller token; replay: npm run sim -- --seed 7 --swarm --trace 300',
        'seed 9: FAILED (10 events): liveness: none; replay: npm run sim -- --seed 9 --swarm --trace 300',
      ],
    });
    expect(reports.simCounts('seed 1: FAILED\n').error).toMatch(/no closing line/);
  });
});
