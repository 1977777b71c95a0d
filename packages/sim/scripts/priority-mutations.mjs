#!/usr/bin/env node
// `npm run sim:mutations:priority [-- PREFIX...]`: proof that the whole-node
// simulator finds the priority cluster's defects of issue 26 by itself. For
// each defect it undoes the fix in a scratch copy of the repository (the
// committed tree, from `git archive`), rebuilds, and searches priority seeds
// until the simulator fails; a seed counts only if it passes with the fix in
// place. It prints the first such seed, what failed, and how long it took.
import { execSync, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('../../../', import.meta.url));
const roles = 'packages/server/src/cluster/role-machine.ts';
/** Defect -> the edits (file, fixed text, text that undoes the fix). */
const MUTATIONS = {
  // The refusal reason starts with the mesh's LinkRefusal (priority-links.ts): 'cluster-identity' or 'name'
  // for another peers list, 'peer-token' for another token.
  'D1 a node refused for its peers list promotes anyway': [[roles, '    p.refusing = { at: now.mono, reason };', "    if (!/^(cluster-identity|name)\\b/.test(reason)) p.refusing = { at: now.mono, reason };"]],
  'D2 a node without the table promotes over one that holds it, and an empty table wins': [
    [roles, "      if (dominates(theirs, mine)) return { reason: `${name} holds a newer copy of the table`, loud: false };\n", ''],
    [roles, '  if (a.established !== b.established) return a.established;\n', ''],
  ],
  'D3 a paused active that resumes grants before it has heard its peers': [
    [roles, "    return this.sinceTick(now) > this.pauseMs ? 'tick' : 'yes';", "    return 'yes';"],
    [roles, "      if (st.role === 'active' && st.handOff === undefined && this.o.others.length > 0) {", "      if (st.role === 'active' && st.handOff === undefined && this.o.others.length < 0) {"],
  ],
  'D4 clock offsets never checked': [
    ['packages/server/src/cluster/clock-offsets.ts', '    return e !== undefined && Math.abs(e.offsetMs) - e.errorMs > boundMs;', '    return false;'],
    [roles, '      const ahead = theta === undefined ? this.clockBoundMs : Math.max(0, theta.offsetMs + theta.errorMs);', '      const ahead = this.clockBoundMs;'],
    [roles, '    if (lost !== undefined && last !== undefined && Math.abs(last.offsetMs) - last.errorMs > this.clockBoundMs) {', '    if (lost !== undefined && last !== undefined && Math.abs(last.offsetMs) - last.errorMs > Infinity) {'],
    [roles, '    if (behind > this.clockBoundMs && ', '    if (behind > Infinity && '],
  ],
  'D5 a data directory moved to Raft mode starts on a floor of Unix microseconds': [
    ['packages/server/src/node/ticketing-node.ts', '      const floorNow = clockFloor(env.clock.wallNow());', '      const floorNow = BigInt(Math.floor(env.clock.wallNow())) * 1000n;'],
    ['packages/server/src/raft/raft-mode.ts', '    const clock = clockFloor(this.host.clock.wallNow());\n    const floor = this.host.tokenFloor > clock ? this.host.tokenFloor : clock;', '    const floor = BigInt(Math.floor(this.host.clock.wallNow())) * 1000n;'],
  ],
  'D6 a node refused for its peer token promotes anyway': [[roles, '    p.refusing = { at: now.mono, reason };', '    if (!/^peer-token\\b/.test(reason)) p.refusing = { at: now.mono, reason };']],
  'D7 a refusal mark cleared only by a later good link': [
    [roles, "    if (p.refusing !== undefined) log(out, 'info', 'a peer that refused our link is gone', { peer });\n    p.refusing = undefined;", ''],
    [roles, 'const REFUSAL_TTL_MS = 15_000;', 'const REFUSAL_TTL_MS = Infinity;'],
  ],
  'D8 a grant the sync-standbys stall holds is delivered after its lease': [
    ['packages/server/src/cluster/priority-mode.ts', "        holdLimitMs: this.host.config['failover-timeout'],\n", ''],
  ],
  // Found by reading (2026-12-07), then by the simulator with --os-suspend: CLOCK_MONOTONIC stops through
  // an OS suspend, so a resumed active saw no gap and granted beside the node that took over meanwhile.
  'S1 an OS suspend is not taken for a pause': [[roles, '    return now.mono - this.lastTick + Math.max(0, now.wall - now.mono - this.tickWallBase);', '    return now.mono - this.lastTick;']],
  // Found by a 5-node search (2026-12-07): candidates blocked by one node's clock all promoted when it died.
  'S2 a peer\'s old "cannot promote" is taken for a current one when a shared block lifts': [
    [roles, '      const cannotSince = p.ineligibleSince === undefined ? undefined : Math.max(p.ineligibleSince, this.eligibleSince ?? now);', '      const cannotSince = p.ineligibleSince;'],
  ],
  // Not one of issue 26's defects: proof that the loss table sees extensions (a standby that took over
  // ended an extended lease at the grant's, though the extension was acknowledged).
  'E1 a standby ignores replicated extensions': [
    ['packages/server/src/cluster/replica.ts', '        const r = table.apply(m.command);', "        const r = table.apply(m.command.type === 'extend' ? { type: 'noop' } : m.command);"],
  ],
};
// SEEDS=N searches fewer seeds (a quick check on a busy machine).
const SEARCH = { nodes: 3, from: 1, seeds: Number(process.env.SEEDS ?? 3000) };
/**
 * Each defect is searched under the default fault mix first, then under calm
 * faults: one every ~2 s over 8 s, which leaves windows with a single failure,
 * where the loss table admits no loss (dense faults excuse nearly every one),
 * then with pauses that are OS suspends, then with five nodes.
 */
const PROFILES = [
  { name: 'default', flags: [] },
  { name: 'calm', flags: ['--fault-gap', '2000', '--duration', '8000'] },
  // Pauses that stop the monotonic clock too (an OS suspend): what found S1.
  { name: 'os-suspend', flags: ['--os-suspend'] },
  // Five nodes (the later --nodes wins): a block that three candidates share, what found S2.
  { name: '5 nodes', flags: ['--nodes', '5'] },
];

const only = process.argv.slice(2);
const scratch = mkdtempSync(join(tmpdir(), 'ticketing-pmut-'));
const baseline = mkdtempSync(join(tmpdir(), 'ticketing-pbase-'));
for (const dir of [scratch, baseline]) {
  execSync(`git archive HEAD | tar -x -C ${dir}`, { cwd: repo, stdio: 'ignore' });
  cpSync(join(repo, 'node_modules'), join(dir, 'node_modules'), { recursive: true, verbatimSymlinks: true });
}
execSync('npx tsc -b packages/sim', { cwd: baseline, stdio: 'inherit' });
const pristine = new Map();
function passesOnBaseline(seed, flags) {
  const r = spawnSync(process.execPath, ['packages/sim/dist/cli.js', '--seed', String(seed), '--mode', 'priority', '--nodes', String(SEARCH.nodes), '--trace', '0', ...flags], { cwd: baseline, encoding: 'utf8' });
  return r.status === 0;
}
try {
  for (const [name, edits] of Object.entries(MUTATIONS)) {
    if (only.length > 0 && !only.some((o) => name.startsWith(o))) continue;
    for (const [file, text] of pristine) writeFileSync(join(scratch, file), text);
    for (const [file, fixed, undone] of edits) {
      const path = join(scratch, file);
      const text = readFileSync(path, 'utf8');
      if (!pristine.has(file)) pristine.set(file, text);
      if (!text.includes(fixed)) throw new Error(`${name}: ${file} no longer has the fix this script undoes; update the script`);
      writeFileSync(path, text.replace(fixed, undone));
    }
    execSync('npx tsc -b packages/sim', { cwd: scratch, stdio: 'inherit' });
    for (const profile of PROFILES) {
      const t0 = performance.now();
      let found;
      for (let from = SEARCH.from, end = SEARCH.from + SEARCH.seeds; from < end && found === undefined; ) {
        const args = ['packages/sim/dist/cli.js', '--seeds', String(end - from), '--from', String(from), '--mode', 'priority', '--nodes', String(SEARCH.nodes), '--trace', '0', ...profile.flags];
        const r = spawnSync(process.execPath, args, { cwd: scratch, encoding: 'utf8' });
        const m = /^seed (\d+): FAILED.*\n(.*)/m.exec(r.stdout);
        if (m === null) break;
        if (passesOnBaseline(m[1], profile.flags)) found = `seed ${m[1]}: ${m[2].slice(0, 200)}`;
        else console.log(`${name}: seed ${m[1]} (${profile.name}) fails with the fix in place too: ${m[2].slice(0, 160)}`);
        from = Number(m[1]) + 1;
      }
      const seconds = ((performance.now() - t0) / 1000).toFixed(1);
      console.log(`${name}, ${profile.name} faults: ${found ?? `NOT FOUND in seeds ${SEARCH.from}-${SEARCH.from + SEARCH.seeds - 1}`} (${seconds} s)`);
      if (found !== undefined) break;
    }
  }
} finally {
  for (const dir of [scratch, baseline]) rmSync(dir, { recursive: true, force: true });
}
