#!/usr/bin/env node
// Smoke test of the npm artefact, as a user on a fresh machine gets it:
//
//   node scripts/smoke/npm.mjs [release/ticketing-<version>.tgz]
//
// packs the release first when no tarball is given (scripts/pack.mjs, needs a
// build), installs the tarball with `npm install -g` into an empty prefix with
// an empty npm cache and no registry (so nothing can come from anywhere but
// the tarball), then runs the installed `ticketing` from a directory outside
// the repository with a bare environment (scripts/smoke/exercise.mjs). It
// also runs it through `npx`. Exit 0 when every step passed.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { exercise } from './exercise.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));
const version = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version;
const work = mkdtempSync(join(tmpdir(), 'ticketing-npm-smoke-'));
try {
  let tarball = process.argv[2];
  if (tarball === undefined) {
    execFileSync(process.execPath, [join(root, 'scripts/pack.mjs'), join(work, 'release')], { stdio: 'inherit' });
    tarball = join(work, 'release', `ticketing-${version}.tgz`);
  }
  tarball = resolve(tarball);
  // Only Node.js and npm on the PATH, a home of its own, no registry: what a fresh machine has.
  const home = join(work, 'home');
  mkdirSync(home);
  const env = { PATH: `${join(work, 'prefix', 'bin')}:${dirname(process.execPath)}:/usr/bin:/bin`, HOME: home, npm_config_cache: join(work, 'cache'), npm_config_registry: 'http://127.0.0.1:9/', npm_config_update_notifier: 'false' };
  const npm = (args) => execFileSync('npm', args, { cwd: home, env, stdio: 'inherit' });
  npm(['install', '--global', '--prefix', join(work, 'prefix'), '--offline', '--no-audit', '--no-fund', tarball]);
  await exercise([join(work, 'prefix', 'bin', 'ticketing')], { cwd: home, env, expectVersion: version });
  // npx: the same tarball, run without installing it first.
  const viaNpx = execFileSync('npx', ['--yes', '--offline', '--package', tarball, '--', 'ticketing', '--version'], { cwd: home, env: { ...env, npm_config_cache: join(work, 'npx-cache') }, encoding: 'utf8' });
  if (!viaNpx.startsWith(`ticketing ${version} `)) throw new Error(`smoke: npx ticketing --version printed ${viaNpx}`);
  console.log(`smoke: npx --package ${tarball} ticketing --version: ${viaNpx.trim()}`);
  console.log('smoke (npm): passed');
} finally {
  rmSync(work, { recursive: true, force: true });
}
