#!/usr/bin/env node
// The package layout as a check (docs/packages.md): each workspace package
// depends only on the packages it may, declares every Ticketing package it
// imports, and nothing outside packages/server reaches into its files.
//   node scripts/check-packages.mjs   (npm test runs it; exit 1 on a violation)
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

/** Which Ticketing packages each package may use at run time. Dev-only test support is allowed everywhere. */
const MAY_DEPEND_ON = {
  protocol: [],
  client: ['protocol'],
  checker: ['protocol'],
  fence: [],
  web: [],
  server: ['protocol', 'web'],
  cli: ['protocol', 'server', 'client', 'checker'],
  'test-support': ['protocol'],
  bench: ['protocol', 'client', 'test-support'],
  sim: ['protocol', 'server', 'checker', 'client'],
};
/** Packages no shipped package may depend on at run time. */
const PRIVATE = new Set(['test-support', 'bench', 'sim']);

const problems = [];

function files(dir, out = []) {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist') continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) files(p, out);
    else if (/\.(ts|mjs|js)$/.test(name)) out.push(p);
  }
  return out;
}

/** The Ticketing packages a source file imports (static, dynamic, or resolved). */
function ticketingImports(text) {
  const found = new Set();
  const patterns = [
    /^\s*(?:import|export)\b[^;'"]*?(?:from\s+)?['"]@ticketing\/([a-z-]+)/gm, // import ... from, export ... from, import 'x'
    /\bimport(?:\.meta\.resolve)?\(\s*['"]@ticketing\/([a-z-]+)/g, // import('x'), import.meta.resolve('x')
  ];
  for (const re of patterns) for (const m of text.matchAll(re)) found.add(m[1]);
  return found;
}

const packages = readdirSync(join(root, 'packages')).filter((d) => statSync(join(root, 'packages', d, 'package.json'), { throwIfNoEntry: false }));
for (const pkg of packages) {
  const manifest = JSON.parse(readFileSync(join(root, 'packages', pkg, 'package.json'), 'utf8'));
  const deps = Object.keys(manifest.dependencies ?? {}).filter((d) => d.startsWith('@ticketing/')).map((d) => d.slice('@ticketing/'.length));
  const devDeps = Object.keys(manifest.devDependencies ?? {}).filter((d) => d.startsWith('@ticketing/')).map((d) => d.slice('@ticketing/'.length));
  const allowed = MAY_DEPEND_ON[pkg];
  if (allowed === undefined) {
    problems.push(`packages/${pkg}: not in scripts/check-packages.mjs; say what it may depend on there and in docs/packages.md`);
    continue;
  }
  for (const d of deps) {
    if (!allowed.includes(d)) problems.push(`packages/${pkg}/package.json: depends on @ticketing/${d}, which it may not (allowed: ${allowed.join(', ') || 'none'})`);
    if (PRIVATE.has(d) && manifest.private !== true) problems.push(`packages/${pkg}/package.json: a shipped package depends on the private @ticketing/${d}`);
  }
  for (const d of devDeps) if (d !== 'test-support') problems.push(`packages/${pkg}/package.json: dev-depends on @ticketing/${d}; only test-support is a dev dependency`);
  const src = join(root, 'packages', pkg, 'src');
  for (const file of statSync(src, { throwIfNoEntry: false }) ? files(src) : []) {
    for (const d of ticketingImports(readFileSync(file, 'utf8'))) {
      if (d !== pkg && !deps.includes(d)) problems.push(`${relative(root, file)}: imports @ticketing/${d}, not in packages/${pkg}/package.json dependencies`);
    }
  }
}

// The server is used by its entry only: no import of its files from elsewhere.
const outside = [join(root, 'test'), join(root, 'scripts'), ...packages.filter((p) => p !== 'server').map((p) => join(root, 'packages', p))];
for (const dir of outside) {
  for (const file of statSync(dir, { throwIfNoEntry: false }) ? files(dir) : []) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/(?:from\s+|import\s*\(\s*|new URL\(\s*)['"`][^'"`]*packages\/server\/(?:src|dist)\/[^'"`]*/g)) {
      problems.push(`${relative(root, file)}: reaches into the server's files (${m[0]}); import '@ticketing/server'`);
    }
  }
}

if (problems.length > 0) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(`package dependencies are as docs/packages.md says (${packages.length} packages)`);
