#!/usr/bin/env node
// The single-file executable for linux-x64 (a Node.js single executable
// application): the `ticketing` command, every production dependency and the
// dashboard pages inside one copy of the Node.js binary that runs this script.
//
//   npm run build && node scripts/sea/build.mjs [OUT_DIR]          (default: release/)
//   npx -y node@24 scripts/sea/build.mjs                           (to ship Node 24 inside)
//   node scripts/sea/build.mjs --check-native-addons                (the addons of NATIVE_ADDONS alone)
//
// Writes ticketing-<version>-linux-x64 and its .sha256, and prints the line
// for the release notes (size and SHA-256). Steps: pack the self-contained npm
// tarball (scripts/pack.mjs) so that exactly the production dependencies are
// in, bundle it into one CommonJS file (rolldown), with the web pages and any
// native addon as SEA assets, then inject the blob with postject.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const require = createRequire(join(root, 'package.json'));
const out = resolve(process.argv.slice(2).find((a) => !a.startsWith('--')) ?? join(root, 'release'));
const version = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version;
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 20 || (major === 20 && minor < 12)) throw new Error(`single executable assets need Node.js 20.12 or later; this is ${process.version}`);
if (process.platform !== 'linux' || process.arch !== 'x64') throw new Error(`this builds the linux-x64 executable; this machine is ${process.platform}-${process.arch}`);

/**
 * Native addons the executable carries: the package, how it loads its
 * binary, and the binary for linux-x64. A SEA cannot load a .node file from
 * inside itself, so it is embedded as an asset, written once to a cache
 * directory and loaded from there (see NATIVE_LOADER). An addon in the
 * dependencies that is not listed here stops the build.
 */
const NATIVE_ADDONS = {
  // The data directory's kernel lock (issue 25): binding.js calls require-addon for prebuilds/<platform>/*.node;
  // the server's seams/file-lock.js requires the package at run time (createRequire), which a bundle cannot follow.
  'fs-native-extensions': { module: 'binding.js', prebuilds: 'prebuilds/linux-x64', requiredBy: '@ticketing/server/dist/seams/file-lock.js' },
};

/** (Node 20 has no sea.getAssetKeys: the keys are written in.) */
const WEB_ASSETS_FROM_SEA = (keys) => `
import { getAsset } from 'node:sea';
const TYPES = { '.html': 'text/html; charset=utf-8', '.css': 'text/css; charset=utf-8', '.js': 'text/javascript; charset=utf-8' };
/** As packages/server/src/http/web-assets.ts, from the executable's assets. */
export function loadWebAssets() {
  const assets = new Map();
  for (const key of ${JSON.stringify(keys)}) {
    const [, dir, name] = key.split('/');
    const url = dir === 'public' && name === 'dashboard.html' ? '/' : dir === 'public' && name === 'deploy.html' ? '/deploy' : '/assets/' + name;
    assets.set(url, { body: Buffer.from(getAsset(key)), type: TYPES[name.slice(name.lastIndexOf('.'))] });
  }
  return assets;
}`;

/** A native addon from the executable's assets: written once per content (by hash) to a cache directory, then loaded. */
const NATIVE_LOADER = (asset) => `
const { getAsset } = require('node:sea');
const { createHash } = require('node:crypto');
const { mkdirSync, writeFileSync, renameSync, existsSync } = require('node:fs');
const { join } = require('node:path');
const { tmpdir } = require('node:os');
const bytes = Buffer.from(getAsset(${JSON.stringify(asset)}));
const dir = join(process.env.TICKETING_NATIVE_CACHE || process.env.XDG_CACHE_HOME || join(process.env.HOME || tmpdir(), '.cache'), 'ticketing');
const file = join(dir, createHash('sha256').update(bytes).digest('hex').slice(0, 16) + '-' + ${JSON.stringify(asset.split('/').pop())});
if (!existsSync(file)) {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const tmp = file + '.' + process.pid;
  writeFileSync(tmp, bytes, { mode: 0o500 });
  renameSync(tmp, file);
}
const m = { exports: {} };
process.dlopen(m, file);
module.exports = m.exports;
`;

/** Bundles `entry` (with `modules` beside it) into one script, and injects it and `assets` into a copy of this Node as `exe`. */
async function makeExecutable({ work, modules, entry, exe, assets }) {
  const addons = embedNativeAddons(modules, assets);
  const { rolldown } = await import(require.resolve('rolldown'));
  const bundle = await rolldown({ input: entry, platform: 'node', plugins: [seaPlugin(addons, Object.keys(assets).filter((k) => k.startsWith('web/')))], logLevel: 'warn' });
  const script = join(work, 'bundle.cjs');
  await bundle.write({ file: script, format: 'cjs', codeSplitting: false });
  await bundle.close();
  const blob = join(work, 'sea.blob');
  writeFileSync(join(work, 'sea-config.json'), JSON.stringify({ main: script, output: blob, disableExperimentalSEAWarning: true, assets }));
  execFileSync(process.execPath, ['--experimental-sea-config', join(work, 'sea-config.json')], { stdio: ['ignore', 'ignore', 'inherit'] });
  rmSync(exe, { force: true });
  copyFileSync(process.execPath, exe);
  chmodSync(exe, 0o755);
  // postject warns about ELF note sections it does not know; the result runs (the smoke test checks).
  execFileSync(process.execPath, [require.resolve('postject/dist/cli.js'), exe, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2'], {
    stdio: ['ignore', 'ignore', 'ignore'],
  });
}

/**
 * `--check-native-addons`: an executable whose only code uses each addon of
 * NATIVE_ADDONS (installed from the npm cache or registry), run once: proves
 * the embedding and loading work before the server depends on the addon.
 */
async function checkNativeAddons(work) {
  for (const name of Object.keys(NATIVE_ADDONS)) {
    const dir = join(work, name);
    mkdirSync(dir);
    execFileSync('npm', ['install', '--prefix', dir, '--no-audit', '--no-fund', '--prefer-offline', name], { stdio: ['ignore', 'ignore', 'inherit'] });
    const entry = join(dir, 'entry.mjs');
    writeFileSync(entry, `import * as addon from '${name}';\nconsole.log(Object.keys(addon.default ?? addon).filter((k) => typeof (addon.default ?? addon)[k] === 'function').length > 0 ? 'loaded' : 'empty');\n`);
    const exe = join(dir, 'check');
    await makeExecutable({ work: dir, modules: join(dir, 'node_modules'), entry, exe, assets: {} });
    const output = execFileSync(exe, [], { encoding: 'utf8', env: { HOME: dir } }).trim();
    if (output !== 'loaded') throw new Error(`${name} inside a single executable printed ${JSON.stringify(output)}`);
    console.log(`${name}: embedded, extracted to the cache and loaded inside a single executable`);
  }
}

const work = mkdtempSync(join(tmpdir(), 'ticketing-sea-'));
try {
  if (process.argv.includes('--check-native-addons')) {
    await checkNativeAddons(work);
  } else {
    mkdirSync(out, { recursive: true });
    execFileSync(process.execPath, [join(root, 'scripts/pack.mjs'), join(work, 'npm')], { stdio: ['ignore', 'ignore', 'inherit'] });
    execFileSync('tar', ['-xzf', join(work, 'npm', `ticketing-${version}.tgz`), '-C', work]);
    const modules = join(work, 'package', 'node_modules');
    const assets = {};
    // The web pages, as the server's web-assets.ts would read them from @ticketing/web.
    const web = join(modules, '@ticketing', 'web');
    for (const dir of ['public', 'dist']) {
      for (const name of readdirSync(join(web, dir))) if (/\.(html|css|js)$/.test(name)) assets[`web/${dir}/${name}`] = join(web, dir, name);
    }
    const entry = join(work, 'entry.mjs');
    writeFileSync(entry, `import { main } from './package/dist/main.js';\nvoid main(process.argv.slice(2));\n`);
    const exe = join(out, `ticketing-${version}-linux-x64`);
    await makeExecutable({ work, modules, entry, exe, assets });
    const sha256 = createHash('sha256').update(readFileSync(exe)).digest('hex');
    writeFileSync(`${exe}.sha256`, `${sha256}  ${relative(out, exe)}\n`);
    const size = statSync(exe).size;
    console.log(`${relative(process.cwd(), exe)}: ${size} bytes (${(size / 2 ** 20).toFixed(1)} MiB), Node.js ${process.version} inside`);
    console.log(`release notes: | ticketing-${version}-linux-x64 | ${size} bytes (${(size / 2 ** 20).toFixed(1)} MiB) | Node.js ${process.version} | sha256 ${sha256} |`);
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}

/** Adds every native addon's linux-x64 binary to `assets`; returns module path -> asset name. */
function embedNativeAddons(modules, assets) {
  const found = [];
  (function walk(dir) {
    for (const name of readdirSync(dir)) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (name.endsWith('.node')) found.push(p);
    }
  })(modules);
  const loaders = {};
  const handled = new Set();
  for (const [name, addon] of Object.entries(NATIVE_ADDONS)) {
    const dir = join(modules, name);
    let binaries;
    try {
      binaries = readdirSync(join(dir, addon.prebuilds)).filter((f) => f.endsWith('.node'));
    } catch {
      continue; // not a dependency (yet)
    }
    if (binaries.length !== 1) throw new Error(`${name}: expected one linux-x64 binary in ${addon.prebuilds}, found ${binaries.join(', ') || 'none'}`);
    const binary = join(dir, addon.prebuilds, binaries[0]);
    assets[`native/${name}.node`] = binary;
    loaders[join(dir, addon.module)] = `native/${name}.node`;
    for (const f of found) if (f.startsWith(`${dir}${sep}`)) handled.add(f);
  }
  const unhandled = found.filter((f) => !handled.has(f) && /linux-x64|[\\/]build[\\/]Release[\\/]/.test(f));
  if (unhandled.length > 0) {
    throw new Error(`native addons the executable cannot load yet: ${unhandled.map((f) => relative(modules, f)).join(', ')}; add them to NATIVE_ADDONS in scripts/sea/build.mjs`);
  }
  return loaders;
}

/** Module replacements that make the bundle run from inside the executable. */
function seaPlugin(addons, webKeys) {
  const replaced = (id, tail) => id.split(sep).join('/').endsWith(tail);
  return {
    name: 'ticketing-sea',
    load(id) {
      // The version is read from package.json next to the module; inside the executable it is fixed.
      if (replaced(id, '@ticketing/server/dist/version.js')) return `export const VERSION = ${JSON.stringify(version)};`;
      // The pages come from the executable's assets instead of @ticketing/web's directory.
      if (replaced(id, '@ticketing/server/dist/http/web-assets.js')) return WEB_ASSETS_FROM_SEA(webKeys);
      if (addons[id] !== undefined) return NATIVE_LOADER(addons[id]);
      return null;
    },
    transform(code, id) {
      // A run-time require of an addon becomes a static import the bundle carries (see NATIVE_ADDONS).
      for (const [name, addon] of Object.entries(NATIVE_ADDONS)) {
        if (addon.requiredBy === undefined || !replaced(id, addon.requiredBy)) continue;
        if (!code.includes('createRequire(import.meta.url)')) throw new Error(`${addon.requiredBy} no longer loads ${name} with createRequire: update scripts/sea/build.mjs`);
        const local = `__addon_${name.replace(/\W/g, '_')}`;
        const lookup = `((name) => { if (name === ${JSON.stringify(name)}) return ${local}.default ?? ${local}; throw new Error('not in this executable: ' + name); })`;
        return `import * as ${local} from ${JSON.stringify(name)};\n${code.replace('createRequire(import.meta.url)', lookup)}`;
      }
      return null;
    },
  };
}
