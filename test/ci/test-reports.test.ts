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
  it('vitest: skipped, pending and todo tests count as skipped, by file and name', () => {
    const file = join(dir, 'vitest.json');
    const test = (fullName: string, status: string) => ({ fullName, status });
    writeFileSync(file, JSON.stringify({
      numTotalTests: 4, numPassedTests: 1, numFailedTests: 1,
      testResults: [{ name: '/repo/test/a.test.ts', assertionResults: [test('a ok', 'passed'), test('a bad', 'failed'), test('a later', 'todo'), test('a off', 'skipped')] }],
    }));
    expect(reports.vitestCounts(file, '/repo')).toEqual({ runner: 'vitest', total: 4, passed: 1, failed: 1, skipped: ['test/a.test.ts > a later', 'test/a.test.ts > a off'] });
    expect(reports.vitestCounts(join(dir, 'missing.json'), '/repo').error).toMatch(/no vitest report/);
  });

  it('JUnit XML (Surefire, pytest): failures, errors and skips, in every report of a folder', () => {
    const surefire = join(dir, 'surefire-reports-jdk25');
    const write = (path: string, cases: string) => writeFileSync(path, `<?xml version="1.0"?><testsuite>${cases}</testsuite>`);
    mkdirSync(surefire);
    writeFileSync(join(surefire, 'a.txt'), 'not a report');
    write(join(surefire, 'TEST-a.xml'), '<testcase classname="a.B" name="ok" time="0.1"/><testcase classname="a.B" name="off &amp; why"><skipped message="no"/></testcase>');
    write(join(surefire, 'TEST-b.xml'), '<testcase classname="a.C" name="bad"><failure message="x">trace</failure></testcase><testcase classname="a.C" name="boom"><error/></testcase>');
    expect(reports.junitCounts('junit', [surefire, join(dir, 'absent')])).toEqual({ runner: 'junit', total: 4, passed: 1, failed: 2, skipped: ['a.B > off & why (jdk25)'] });
    const pytest = join(dir, 'pytest.report'); // any name: npm test names it after the step
    write(pytest, '<testcase classname="tests.test_server" name="test_fifo"><skipped type="pytest.skip" message="server not built"/></testcase>');
    expect(reports.junitCounts('pytest', [pytest])).toMatchObject({ total: 1, passed: 0, skipped: ['tests.test_server > test_fifo'] });
    write(pytest, '');
    expect(reports.junitCounts('pytest', [pytest]).error).toBe('pytest ran no test');
  });

  it("the simulator: seeds run and failed, and the inconclusive checks, from its closing line", () => {
    const line = '300 swarm seed(s) from 466760001, 3 nodes: 2 failed; 1 inconclusive history checks (budget 2000000 steps per key, the most a seed took: 70); 1 events in 1.0 s (1 events/s)';
    expect(reports.simCounts(`fresh seeds ...\n${line}\n`)).toEqual({ runner: 'sim seeds', total: 300, passed: 298, failed: 2, skipped: [], inconclusive: 1 });
    expect(reports.simCounts('seed 1: FAILED\n').error).toMatch(/no closing line/);
  });
});
