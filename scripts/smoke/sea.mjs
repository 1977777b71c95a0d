#!/usr/bin/env node
// Smoke test of the single-file executable (linux-x64):
//
//   node scripts/smoke/sea.mjs [release/ticketing-<version>-linux-x64]
//
// builds it first when no file is given (scripts/sea/build.mjs, needs a
// build), then runs it from an empty directory with no Node.js on the PATH
// and no repository around it (scripts/smoke/exercise.mjs). Exit 0 when
// every step passed.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { exercise } from './exercise.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));
const version = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version;
const work = mkdtempSync(join(tmpdir(), 'ticketing-sea-smoke-'));
try {
  let built = process.argv[2];
  if (built === undefined) {
    execFileSync(process.execPath, [join(root, 'scripts/sea/build.mjs'), join(work, 'release')], { stdio: 'inherit' });
    built = join(work, 'release', `ticketing-${version}-linux-x64`);
  }
  // A copy in a directory of its own, as a user would put it in /usr/local/bin.
  const exe = join(work, 'ticketing');
  copyFileSync(resolve(built), exe);
  execFileSync('chmod', ['755', exe]);
  // Nothing on the PATH at all: the executable needs no Node.js, npm or shell.
  mkdirSync(join(work, 'empty-bin'));
  await exercise([exe], { cwd: mkdtempSync(join(work, 'run-')), env: { PATH: join(work, 'empty-bin'), HOME: work }, expectVersion: version });
  console.log('smoke (single executable): passed');
} finally {
  rmSync(work, { recursive: true, force: true });
}
