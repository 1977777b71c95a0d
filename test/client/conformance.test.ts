/**
 * The shared client conformance suite (testdata/conformance/*.case, format in
 * testdata/conformance/README.md) against the TypeScript client. The JVM and
 * Python clients run the same files.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadCases, runCase } from './helpers/conformance.js';

const cases = loadCases();

/** Cases the TypeScript client still fails (issue 15); each entry is removed with its fix. */
const knownDefects = new Set<string>([]);

describe('client conformance suite', () => {
  for (const c of cases) {
    const run = knownDefects.has(c.name) ? it.fails : it;
    run(`${c.file} ${c.name}`, async () => runCase(c), 20_000);
  }
});

describe('docs/client.md', () => {
  it('describes every conformance case', () => {
    const doc = readFileSync(new URL('../../docs/client.md', import.meta.url), 'utf8');
    expect(cases.filter((c) => !doc.includes(`\`${c.name}\``)).map((c) => c.name)).toEqual([]);
  });
});
