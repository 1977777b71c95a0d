/**
 * CI's fresh seeds: besides the pinned regression seeds, every CI run tries a
 * window of seeds that moves with the commit, so the seeds searched grow with
 * each commit instead of re-running the same range forever. The window is a
 * pure function of the commit id, so a run replays from the id (or from the
 * `--seeds N --from S` the run prints).
 *
 * Windows start at 10,000,001, above every range the docs and the long runs
 * use, on a grid of MAX_FRESH, so two commits' windows either coincide (one
 * commit id in 400,000) or do not overlap; seeds stay below 2^32.
 */
import { execFileSync } from 'node:child_process';

export const MAX_FRESH = 10_000;
const FIRST = 10_000_001;
const SLOTS = 400_000;

/** The commit whose window to run: $SIM_COMMIT, else the checkout's HEAD. */
function currentCommit(): string {
  const given = process.env.SIM_COMMIT;
  if (given !== undefined && given !== '') return given;
  try {
    return execFileSync('git', ['rev-parse', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    throw new Error('--fresh needs a git checkout (or SIM_COMMIT=<commit id>) to choose its seeds');
  }
}

/** The first `count` seeds of `commit`'s window. */
export function freshWindow(count: number, commit = currentCommit()): { from: number; count: number; why: string } {
  if (!/^[0-9a-f]{8,40}$/i.test(commit)) throw new Error(`SIM_COMMIT ${commit} is not a commit id (8 to 40 hex digits)`);
  const slot = Number.parseInt(commit.slice(0, 8), 16) % SLOTS;
  return { from: FIRST + slot * MAX_FRESH, count, why: `the window of commit ${commit.slice(0, 12)}` };
}
