/**
 * The architecture check CI runs (scripts/check-architecture.mjs): the repository
 * passes it, and it does fail on what it forbids (a check that cannot fail proves nothing).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
// @ts-expect-error a plain .mjs script without types
import { check } from '../../../scripts/check-architecture.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const checkRoot = check as (root: string) => string[];
const dirs: string[] = [];

/** A throw-away repository with `files` (paths relative to its root). */
function repo(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'arch-check-'));
  dirs.push(dir);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('architecture check', () => {
  it('passes on this repository', () => {
    expect(checkRoot(root)).toEqual([]);
  });

  it('finds an import cycle, type-only imports included', () => {
    const dir = repo({
      'packages/p/src/a.ts': "import { b } from './b.js';\nexport const a = b;\n",
      'packages/p/src/b.ts': "import type { C } from './sub/c.js';\nexport const b: C = 1;\n",
      'packages/p/src/sub/c.ts': "import { a } from '../a.js';\nexport type C = number;\nvoid a;\n",
      'packages/p/src/free.ts': "import { a } from './a.js';\nvoid a;\n",
    });
    expect(checkRoot(dir)).toEqual(['import cycle: packages/p/src/a.ts <-> packages/p/src/b.ts <-> packages/p/src/sub/c.ts']);
  });

  it('finds every direct use of time, timers, sockets, files and randomness in server code outside the seams', () => {
    const dir = repo({
      'packages/server/src/node/bad.ts': [
        "import { readFileSync } from 'node:fs';",
        "import type { Socket } from 'node:net';",
        "import { connect } from 'net';",
        'export function f(s: Socket): number {',
        '  setTimeout(() => s.destroy(), 1);',
        '  const t = { setTimeout: 1 };',
        '  process.on("SIGHUP", () => {});',
        '  void connect; void readFileSync; void t; void new Date(0);',
        '  return Date.now() + performance.now() + Math.random() + new Date().getTime();',
        '}',
      ].join('\n'),
      'packages/server/src/seams/system-clock.ts': 'export const now = () => Date.now();\n',
    });
    const where = 'seam bypassed: packages/server/src/node/bad.ts';
    expect(checkRoot(dir).map((p) => p.replace(/ \(go through.*$/, ''))).toEqual([
      `${where}:1 uses imports node:fs`,
      `${where}:3 uses imports net`,
      `${where}:5 uses setTimeout`,
      `${where}:7 uses process.on`,
      `${where}:9 uses Date.now`,
      `${where}:9 uses performance.now`,
      `${where}:9 uses Math.random`,
      `${where}:9 uses new Date()`,
    ]);
  });
});
