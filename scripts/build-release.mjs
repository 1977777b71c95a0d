// Builds an earlier release of Ticketing from this repository's history, for the mixed-version
// rolling-upgrade tests (test/upgrade): `npm run setup` calls it for the previous release
// (scripts/releases.json) and skips it once built. The source is `git archive` of the release's
// tag, else of the commit the file records (a checkout without tags); with neither it fails and
// says how to fetch them, never skipping the tests' release. Dependencies come from the release's
// own lock file (`npm ci --prefer-offline`: the npm cache first), without lifecycle scripts, then
// `tsc -b` as the release's own `prepare` does (every package: the server also serves
// packages/web's build, which no project reference names). The tree is built beside `dir` and
// renamed into place last, with a marker naming the commit, so an interrupted build is never
// taken for a whole one.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

export const BUILT_MARKER = '.ticketing-release-built';

/** The git ref to build `release` ({ version, tag, commit }) from, in the repository at `root`; throws when there is none. */
export function releaseRef(root, release) {
  const git = (...args) => spawnSync('git', ['-C', root, ...args], { encoding: 'utf8' });
  const tagged = git('rev-parse', '--verify', '--quiet', `refs/tags/${release.tag}^{commit}`);
  if (tagged.status === 0) {
    const commit = tagged.stdout.trim();
    if (commit !== release.commit) {
      throw new Error(`tag ${release.tag} names commit ${commit}, but scripts/releases.json records ${release.commit} for release ${release.version}: which one was released? Fix the tag or the file`);
    }
    return release.tag;
  }
  if (git('cat-file', '-e', `${release.commit}^{commit}`).status === 0) return release.commit;
  throw new Error(
    `cannot build release ${release.version} (the rolling-upgrade tests in test/upgrade start it): neither its tag ${release.tag} ` +
      `nor its commit ${release.commit} (scripts/releases.json) is in the repository at ${root}. ` +
      `Fetch them (git fetch origin tag ${release.tag}; in a shallow clone git fetch --unshallow) and run npm run setup again`,
  );
}

/** Runs a command to completion, its output inherited; throws when it fails. */
function runOrThrow(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { stdio: ['ignore', 'inherit', 'inherit'], ...options });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status ?? r.signal ?? r.error?.message})`);
  return r;
}

/**
 * Builds `release` into `dir` (replacing what is there). `run(cmd, args, options)` runs a
 * command and throws or exits when it fails (setup's own). Returns the ref it built from.
 */
export function buildRelease({ root, release, dir, run = runOrThrow }) {
  const ref = releaseRef(root, release);
  mkdirSync(dirname(dir), { recursive: true });
  const tmp = mkdtempSync(join(dirname(dir), `.${basename(dir)}-`));
  try {
    const tar = join(tmp, '.source.tar');
    run('git', ['-C', root, 'archive', '--format=tar', '-o', tar, ref]);
    run('tar', ['-xf', tar, '-C', tmp]);
    rmSync(tar);
    run('npm', ['ci', '--prefer-offline', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: tmp });
    run(process.execPath, [join(tmp, 'node_modules/typescript/bin/tsc'), '-b'], { cwd: tmp });
    const said = run(process.execPath, [join(tmp, 'bin/ticketing'), '--version'], { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' }).stdout.trim();
    if (!said.startsWith(`ticketing ${release.version} `)) throw new Error(`the build of ${ref} says "${said}", not release ${release.version}`);
    writeFileSync(join(tmp, BUILT_MARKER), `${release.commit}\n`);
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return { ref };
}
