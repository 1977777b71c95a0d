#!/usr/bin/env node
// The npm artefacts of a release, from a built checkout (`npm run build` first):
//
//   node scripts/pack.mjs [OUT_DIR]        (default: release/)
//
// writes one tarball per published package (@ticketing/protocol, client,
// checker, web, server, cli) and `ticketing-<version>.tgz`: @ticketing/cli
// with every production dependency bundled inside it, so that
//
//   npm install -g ./ticketing-<version>.tgz
//
// needs no registry and no repository: only Node.js (docs/production.md).
// The plain per-package tarballs are for a registry; they name each other by
// version, so they install from one only once all are published there.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
/** In dependency order. */
export const PUBLISHED = ['protocol', 'client', 'checker', 'web', 'server', 'cli'];

const out = resolve(process.argv[2] ?? join(root, 'release'));
mkdirSync(out, { recursive: true });
const npm = (args, cwd = root) => execFileSync('npm', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
const manifestOf = (dir) => JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));

for (const pkg of PUBLISHED) {
  if (!existsSync(join(root, 'packages', pkg, 'dist'))) throw new Error(`packages/${pkg} is not built: run npm run build first`);
}
const version = manifestOf(root).version;

/** The files a manifest promises: main, bin and every exports target (without wildcards). */
function entryPoints(m) {
  const targets = [m.main, ...Object.values(m.bin ?? {})];
  const walk = (v) => (typeof v === 'string' ? targets.push(v) : v !== null && typeof v === 'object' && Object.values(v).forEach(walk));
  walk(m.exports);
  return targets.filter((t) => t !== undefined && !t.includes('*')).map((t) => t.replace(/^\.\//, ''));
}
const tarballs = {};
for (const pkg of PUBLISHED) {
  const m = manifestOf(join(root, 'packages', pkg));
  if (m.version !== version) throw new Error(`packages/${pkg} is at ${m.version}, the release at ${version}: every package shares the release's version`);
  const [packed] = JSON.parse(npm(['pack', '--json', '--workspace', `packages/${pkg}`, '--pack-destination', out]));
  const missing = entryPoints(m).filter((f) => !packed.files.some((p) => p.path === f));
  if (missing.length > 0) throw new Error(`${m.name}: its tarball lacks ${missing.join(', ')} (see "files" in packages/${pkg}/package.json)`);
  tarballs[m.name] = join(out, packed.filename);
  console.log(packed.filename);
}

// The self-contained CLI: a copy of the packed @ticketing/cli whose node_modules
// holds its production dependencies (the other packages from their tarballs,
// third-party code from the npm cache or registry), all bundled by npm pack.
const stage = mkdtempSync(join(tmpdir(), 'ticketing-pack-'));
try {
  execFileSync('tar', ['-xzf', tarballs['@ticketing/cli'], '-C', stage]);
  const dir = join(stage, 'package');
  const manifest = manifestOf(dir);
  const deps = { ...manifest.dependencies };
  // Install the other Ticketing packages from their tarballs, never from a registry (they may not be published).
  const local = Object.fromEntries(Object.entries(tarballs).filter(([name]) => name !== '@ticketing/cli').map(([name, file]) => [name, `file:${file}`]));
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ ...manifest, dependencies: { ...deps, ...local }, overrides: local }, null, 2));
  npm(['install', '--omit=dev', '--no-package-lock', '--no-audit', '--no-fund', '--prefer-offline', '--ignore-scripts'], dir);
  rmSync(join(dir, 'node_modules', '.package-lock.json'), { force: true });
  // Back to plain version ranges: bundled dependencies are taken from the tarball as they are.
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ ...manifest, dependencies: deps, bundleDependencies: Object.keys(deps) }, null, 2)}\n`);
  const file = npm(['pack', '--silent', '--pack-destination', stage], dir).split('\n').at(-1);
  const bundled = join(out, `ticketing-${version}.tgz`);
  renameSync(join(stage, file), bundled);
  console.log(`ticketing-${version}.tgz (@ticketing/cli with its dependencies: npm install -g ./ticketing-${version}.tgz)`);
} finally {
  rmSync(stage, { recursive: true, force: true });
}
