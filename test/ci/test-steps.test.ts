/**
 * npm test's vitest steps on the machine's Node (scripts/test-steps.mjs) must run every test file
 * once: a file no step takes never runs, and one two steps take costs CI minutes (vitest matches a
 * filter anywhere in a path, so a folder filter can take another package's files too).
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

interface Step {
  name: string;
  command(ctx: { report: string; root: string }): { cmd: string; args: string[]; env: Record<string, string> };
}
const root = fileURLToPath(new URL('../..', import.meta.url));
const steps = (await import(new URL('../../scripts/test-steps.mjs', import.meta.url).href)) as { lanes: Record<string, Step[]> };

/** The files vitest would run for these arguments (its filters, --exclude, the config). */
function listed(args: string[], env: Record<string, string>): string[] {
  const out = execFileSync(process.execPath, ['node_modules/vitest/vitest.mjs', 'list', '--filesOnly', ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    encoding: 'utf8',
  });
  return out.split('\n').filter((l) => l.endsWith('.test.ts'));
}

describe('npm test steps', () => {
  it('the vitest steps on the machine Node run every test file exactly once', () => {
    const taken = new Map<string, string[]>();
    for (const step of Object.values(steps.lanes).flat()) {
      const { cmd, args, env } = step.command({ report: '/dev/null', root });
      if (cmd !== process.execPath || args[0] !== 'node_modules/vitest/vitest.mjs') continue;
      const filters = args.slice(args.findIndex((a) => a.startsWith('--outputFile')) + 1);
      for (const file of listed(filters, env)) taken.set(file, [...(taken.get(file) ?? []), step.name]);
    }
    const all = listed([], { TICKETING_LONG_TESTS: '1' });
    expect(all.length).toBeGreaterThan(100);
    expect(all.filter((f) => !taken.has(f))).toEqual([]);
    expect([...taken].filter(([, by]) => by.length > 1)).toEqual([]);
  }, 60_000);
});
