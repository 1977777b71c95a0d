/**
 * The repository's docs stand alone: they say everything in their own words
 * and never send a reader to a file outside the repository (the project's
 * contract documents live elsewhere and are not shipped).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO } from '@ticketing/test-support';

const FORBIDDEN = /\b(?:PROTOCOL|CLIENT|CLI|DESIGN)\.md\b|\.\.\/shared\b|shared\/(?:seeds|PROTOCOL)|\bseed 00\d\b/;

function docs(): string[] {
  const list = ['README.md', 'CHANGELOG.md'];
  for (const f of readdirSync(join(REPO, 'docs'))) if (f.endsWith('.md')) list.push(`docs/${f}`);
  for (const dir of ['packages', 'clients']) {
    for (const p of readdirSync(join(REPO, dir), { withFileTypes: true })) {
      if (p.isDirectory() && readdirSync(join(REPO, dir, p.name)).includes('README.md')) list.push(`${dir}/${p.name}/README.md`);
    }
  }
  return list;
}

describe('the docs', () => {
  it.each(docs())('%s cites nothing outside the repository', (file) => {
    const offending = readFileSync(join(REPO, file), 'utf8').split('\n').map((line, i) => `${file}:${i + 1}: ${line}`).filter((l) => FORBIDDEN.test(l));
    expect(offending).toEqual([]);
  });

  it('the README quick start does not reinstall node_modules under a running server', () => {
    const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
    expect(readme).not.toMatch(/npm cit\b/);
  });
});
