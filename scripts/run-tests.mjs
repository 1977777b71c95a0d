#!/usr/bin/env node
// `npm test`: every check and every test, in the order that fails fastest.
// Installs missing Debian test dependencies first (needs root or sudo).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const steps = [
  ['test dependencies', 'scripts/install-test-deps.sh', []],
  ['build', 'npx', ['tsc', '-b']],
  ['package dependencies (docs/packages.md)', 'node', ['scripts/check-packages.mjs']],
  ['config JSON Schema up to date', 'node', ['scripts/config-schema.mjs', '--check']],
  ['type-check tests', 'npx', ['tsc', '-p', 'tsconfig.tests.json']],
  ['lint', 'npx', ['eslint', '.']],
  ['architecture (import cycles, seams)', 'node', ['scripts/check-architecture.mjs']],
  ['unit and black-box tests', 'npx', ['vitest', 'run', '--exclude', 'test/browser/**']],
  // Headless Chromium on its own: it loads the machine, and timing tests should not share it.
  ['browser tests', 'npx', ['vitest', 'run', 'test/browser']],
  // The JVM client against the binary just built, on JDK 17 and (when installed) Temurin 25.
  ['JVM client (mvn verify)', 'mvn', ['-B', '-q', '-f', 'clients/jvm', 'verify', '-Dticketing.requireServer=true']],
  // The Python client: a venv from PyPI, mypy --strict, pytest (black-box tests use the binary built above).
  ['Python client (mypy --strict, pytest)', 'scripts/python-tests.sh', []],
];

for (const [name, cmd, args] of steps) {
  const t0 = Date.now();
  console.log(`\n=== ${name}`);
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) {
    console.error(`\n=== ${name} FAILED (exit ${r.status ?? r.signal})`);
    process.exit(r.status ?? 1);
  }
  console.log(`=== ${name} passed in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}
