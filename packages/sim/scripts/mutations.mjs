#!/usr/bin/env node
// `npm run sim:mutations [-- PREFIX...]`: proof that the whole-node simulator
// sees the Raft defects it was built to find. For each defect it undoes the
// fix in a scratch copy of the repository (git worktree), rebuilds, and
// searches seeds until the simulator fails; it prints the first failing seed
// and how long the search took. A fix that no seed undoes is reported too.
// With `--swarm` it searches swarm seeds (each draws its own faults and load).
// With `--regressions` it searches nothing: it re-checks that each seed of the
// regression list (packages/sim/test/regression-seeds.json) that names a
// mutation still fails with that fix undone, and names those to replace.
import { execSync, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('../../../', import.meta.url));
const raft = 'packages/server/src/raft';
/** Defect -> the edits (file, fixed text, text that undoes the fix). */
const MUTATIONS = {
  'D1 a wrong definite T after step-down': [['packages/server/src/session/session.ts', 'if (this.replies.dropUncommitted()) {', 'if (this.replies.dropUncommitted() && false) {']],
  'D2 damage in the middle of the WAL cut silently': [[`${raft}/raft-storage.ts`, 'cut = !last ? undefined : framed ? tornWriteCut(buf, pos, writeStart) : next === undefined ? pos : undefined;', 'cut = !last ? undefined : pos;']],
  'D3 a short write taken as durable': [
    ['packages/server/src/storage/durable-dir.ts', 'if (n !== data.length) throw', 'if (false) throw'],
  ],
  'D4 InstallSnapshot drops the suffix it kept': [[`${raft}/raft-mode.ts`, 'await this.storage.saveSnapshot(s, this.core.hardState, tail);', 'await this.storage.saveSnapshot(s, this.core.hardState, []);']],
  // With the probe as the issue found it (defect 10: back to index 1 after a silent heartbeat),
  // which is what sent snapshots to followers that already held their last entry.
  'D4+ InstallSnapshot drops the suffix it kept, probe from index 1': [
    [`${raft}/raft-mode.ts`, 'await this.storage.saveSnapshot(s, this.core.hardState, tail);', 'await this.storage.saveSnapshot(s, this.core.hardState, []);'],
    [`${raft}/raft-core.ts`, 'if (!pr.probing) pr.next = pr.match + 1;', 'pr.next = pr.match + 1;'],
  ],
  'D5+ the durable index not lowered by a snapshot, probe from index 1': [
    [`${raft}/raft-core.ts`, 'if (this.stable > this.snap.index) this.stable = this.snap.index;', ''],
    [`${raft}/raft-core.ts`, 'if (!pr.probing) pr.next = pr.match + 1;', 'pr.next = pr.match + 1;'],
  ],
  'D5 the durable index not lowered by a snapshot': [[`${raft}/raft-core.ts`, 'if (this.stable > this.snap.index) this.stable = this.snap.index;', '']],
  'D6 a joining node votes and campaigns': [
    [`${raft}/raft-core.ts`, '    if (!this.mayCampaign) return this.resetTimeout();\n', '    if (!this.isVoter || this.peersDisagree) return this.resetTimeout();\n'],
    [`${raft}/raft-core.ts`, '!otherFounders && this.mayVote && this.voterIds.includes(m.from)', '!otherFounders && this.voterIds.includes(m.from)'],
  ],
  'D7 role changes only when the Ready loop is idle': [
    [`${raft}/raft-mode.ts`, '    // A message can depose this leader (or make this node one): act on it now, before the next\n    // client request is read, not when the Ready loop next goes idle.\n    this.checkRole();\n', ''],
    [`${raft}/raft-mode.ts`, '      this.checkRole(); // CheckQuorum may have deposed this leader\n', ''],
    [`${raft}/raft-mode.ts`, '          // Under constant load the loop may never go idle: roles and snapshots are checked every pass.\n          this.checkRole();\n          this.maybeSnapshot();\n', ''],
    [`${raft}/raft-mode.ts`, 'if (this.log !== undefined && (!leading || this.leadTerm !== this.core.term)) this.stepDown();', 'if (this.log !== undefined && !leading) this.stepDown();'],
  ],
  'N1 a T decided on uncommitted state written after step-down': [
    ['packages/server/src/session/reply-queue.ts', 'if (slot.answer !== undefined && slot.index > commit) dropped = true;', ''],
  ],
  'D9 leases restart at every step-down': [[`${raft}/applied-state.ts`, 'if (old !== undefined && old.token === r.token) r.due = old.due;', '']],
  // Issue 29: lease extension. Followers must apply an Extend (a new leader would end the lease at the grant's).
  'X1 a follower ignores Extend entries': [[`${raft}/applied-state.ts`, 'if (!isConfigurationCommand(e.command)) table.apply(decodeCommand(e.command));', "if (!isConfigurationCommand(e.command) && !e.command.startsWith('L ')) table.apply(decodeCommand(e.command));"]],
  // Issue 27: the defects of Raft v2, each fix undone.
  '27/D-1 entries kept after an InstallSnapshot written again (a torn rewrite cuts the tail)': [
    [`${raft}/raft-core.ts`, 'const from = this.snapshotToInstall !== undefined ? this.snap.index + 1 : Math.max(this.unstableFrom, this.snap.index + 1);', 'const from = Math.max(this.unstableFrom, this.snap.index + 1);'],
    [`${raft}/raft-core.ts`, '      this.entries = this.entries.slice(s.index - this.snap.index);\n', '      this.entries = this.entries.slice(s.index - this.snap.index);\n      this.unstableFrom = Math.min(this.unstableFrom, s.index + 1);\n'],
    [`${raft}/raft-storage.ts`, '        if (this.entries[index - this.snap.index - 1]?.term === term) return;\n', ''],
  ],
  '27/D-4 a snapshot segment\'s hard state without the membership': [
    [`${raft}/raft-mode.ts`, 'await this.storage.saveSnapshot(s, this.core.hardState, tail);', "await this.storage.saveSnapshot(s, { ...this.core.hardState, membership: 'member' }, tail);"],
    [`${raft}/raft-mode.ts`, '.saveSnapshot(stored, this.core.hardState, tail)', ".saveSnapshot(stored, { ...this.core.hardState, membership: 'member' }, tail)"],
  ],
  '27/D-6 a lock the leader ended gets a fresh lease at step-down': [[`${raft}/applied-state.ts`, '      else r.due = endedDue.get(r.token) ?? r.due;\n', '']],
  '27/D-2 a ghost grant of a named identity released without the identity': [
    ['packages/server/src/session/session.ts', 'if (this.ctx.engine.release(key, token, identity) ||', 'if (this.ctx.engine.release(key, token, undefined) ||'],
  ],
  '27/D-3 the timer wheel catches up one tick at a time after a long standby': [
    ['packages/server/src/engine/timer-wheel.ts', 'if (target - this.cursor > this.mask) looked += this.leap(target, now, fire);', 'if (false) looked += this.leap(target, now, fire);'],
  ],
  // Found by the time-warp fault (sim seed 38): a lease end handing the lock to a waiter removed its wait end.
  'L1 catching up past the wheel fires a node an earlier firing removed': [['packages/server/src/engine/timer-wheel.ts', '      if (node.wheelTick !== tick) continue;\n', '']],
  // Found by reading (2026-12-07): a learner's acknowledgement counted toward a leadership check.
  'Q1 a learner counts toward the majority that confirms a leader for a read': [
    [`${raft}/raft-core.ts`, '    let best = 0;\n    for (const v of this.voterIds) {', '    const rounds = [this.readRound, ...this.others.map((p) => this.readAcks.get(p) ?? 0)].sort((a, b) => b - a);\n    if (rounds.length > 0) return rounds[this.quorum - 1]!;\n    let best = 0;\n    for (const v of this.voterIds) {'],
  ],
  '27/M1 a membership change before the previous one committed': [[`${raft}/raft-core.ts`, "    if (this.configHeld && this.configIndex > this.commit) return `the membership change at index ${this.configIndex} has not committed yet`;\n", '']],
  '27/M2 a membership change before the leader committed in its term': [[`${raft}/raft-core.ts`, "    if (this.commit < this.termStart) return 'this leader has not committed an entry of its term yet';\n", '']],
  '27/M3 more than one voter changed at a time': [[`${raft}/raft-core.ts`, "    if (changed > 1) return 'a change may add or remove one voter at a time';\n", '']],
  '27/M4 a learner refuses to vote for a candidate whose newer membership makes it a voter': [
    [`${raft}/raft-core.ts`, '!otherFounders && this.mayVote && this.voterIds.includes(m.from)', '!otherFounders && this.mayVote && this.isVoter && this.voterIds.includes(m.from)'],
  ],
  // Planted faults (issue 27, item 8): the node's own failures, which must fail a seed by themselves.
  'P1 planted: a node crashes itself (a spurious fatal storage error on 1% of WAL writes)': [
    [`${raft}/raft-storage.ts`, '    if (data.length === 0) return;\n', "    if (batch.entries.some((e) => e.index % 100 === 0)) throw new StorageError('planted: a spurious storage failure');\n    if (data.length === 0) return;\n"],
  ],
  'P4 planted: an exception of our own in the Ready loop on 1% of WAL writes': [
    [`${raft}/raft-storage.ts`, '    if (data.length === 0) return;\n', "    if (data.length === 0) return;\n    if (batch.entries.some((e) => e.index % 100 === 0)) throw new Error('planted: a fault of our own');\n"],
  ],
  'P2 planted: E internal on 1 in 18 acquires (an engine exception)': [
    ['packages/server/src/session/session.ts', '    this.counts.acquires++;\n', "    this.counts.acquires++;\n    if (this.counts.acquires % 18 === 0) throw new Error('planted: an engine fault');\n"],
  ],
  'P3 planted: an exception on 2% of appends': [
    [`${raft}/raft-core.ts`, '    let prevIndex = m.prevIndex;\n', "    if (m.entries.some((e) => e.index % 50 === 0)) throw new Error('planted: a fault handling an append');\n    let prevIndex = m.prevIndex;\n"],
  ],
  'D10 no directory fsync for a new WAL': [
    [`${raft}/raft-storage.ts`, '    await disk.syncDir(dir);\n    if (storage.interruptedSnapshot ||', '    if (storage.interruptedSnapshot ||'],
    ['packages/server/src/storage/durable-dir.ts', '  disk.syncDirSync(parent);\n', ''],
  ],
};
const SEARCH = [
  { nodes: 3, from: 1, seeds: 2000 },
  { nodes: 5, from: 100001, seeds: 500 },
];

const swarm = process.argv.includes('--swarm') ? ['--swarm'] : [];
const regressions = process.argv.includes('--regressions');
// --limit N: at most N seeds of each range (a quick search; the table in docs/verify.md says which were).
const limitAt = process.argv.indexOf('--limit');
const limit = limitAt < 0 ? Infinity : Number(process.argv[limitAt + 1]);
// --nodes N: only the range with N nodes.
const nodesAt = process.argv.indexOf('--nodes');
const onlyNodes = nodesAt < 0 ? undefined : Number(process.argv[nodesAt + 1]);
const valued = ['--limit', '--nodes'];
const only = process.argv.slice(2).filter((a, i, all) => a !== '--swarm' && a !== '--regressions' && !valued.includes(a) && !valued.includes(all[i - 1]));
/** The regression seeds that name a mutation, by mutation (its name's first word). */
const pinned = new Map();
for (const c of JSON.parse(readFileSync(join(repo, 'packages/sim/test/regression-seeds.json'), 'utf8')).foundByThisSimulator) {
  if (c.mutation === undefined) continue;
  const name = Object.keys(MUTATIONS).find((n) => n.split(' ')[0] === c.mutation);
  if (name === undefined) throw new Error(`regression seed ${c.seed} names mutation ${c.mutation}, which this script does not have`);
  pinned.set(name, [...(pinned.get(name) ?? []), c]);
}
// Every mutation must still find the fix it undoes: all stale ones are named at once, before any build.
const stale = Object.entries(MUTATIONS).flatMap(([name, edits]) => edits.filter(([file, fixed]) => !readFileSync(join(repo, file), 'utf8').includes(fixed)).map(([file]) => `${name} (${file})`));
if (stale.length > 0) throw new Error(`these mutations no longer find the fix they undo; update the script:\n  ${stale.join('\n  ')}`);
/** Runs one seed in `cwd`: true when it passes. */
function seedPasses(cwd, c) {
  const args = ['packages/sim/dist/cli.js', '--seed', String(c.seed), '--nodes', String(c.nodes), '--mode', c.mode ?? 'raft', '--trace', '0', ...(c.swarm === true ? ['--swarm'] : [])];
  return spawnSync(process.execPath, args, { cwd, encoding: 'utf8' }).status === 0;
}
const scratch = mkdtempSync(join(tmpdir(), 'ticketing-mutations-'));
const baseline = mkdtempSync(join(tmpdir(), 'ticketing-baseline-'));
for (const dir of [scratch, baseline]) {
  execSync(`git worktree add --detach ${dir} HEAD`, { cwd: repo, stdio: 'ignore' });
  cpSync(join(repo, 'node_modules'), join(dir, 'node_modules'), { recursive: true, verbatimSymlinks: true });
}
execSync('npx tsc -b packages/sim', { cwd: baseline, stdio: 'inherit' });
/** A seed found with a fix undone counts only if it passes with the fix in place. */
function passesOnBaseline(seed, nodes) {
  return seedPasses(baseline, { seed, nodes, swarm: swarm.length > 0 });
}
try {
  for (const [name, edits] of Object.entries(MUTATIONS)) {
    if (only.length > 0 && !only.some((o) => name.startsWith(o))) continue;
    if (regressions && !pinned.has(name)) continue;
    execSync('git checkout -q -- packages/server', { cwd: scratch });
    for (const [file, fixed, undone] of edits) {
      const path = join(scratch, file);
      const text = readFileSync(path, 'utf8');
      if (!text.includes(fixed)) throw new Error(`${name}: ${file} no longer has the fix this script undoes; update the script`);
      writeFileSync(path, text.replace(fixed, undone));
    }
    execSync('npx tsc -b packages/sim', { cwd: scratch, stdio: 'inherit' });
    if (regressions) {
      for (const c of pinned.get(name)) {
        const what = `${c.swarm === true ? 'swarm ' : ''}seed ${c.seed} (${c.nodes} nodes)`;
        console.log(`${name}: ${what} ${seedPasses(scratch, c) ? 'NO LONGER FAILS with the fix undone: replace it with a seed this search finds' : 'still fails with the fix undone'}`);
      }
      continue;
    }
    const t0 = performance.now();
    let found;
    for (const s of SEARCH.filter((r) => onlyNodes === undefined || r.nodes === onlyNodes)) {
      // The first failing seed; one that fails with the fix in place too says nothing: search on.
      for (let from = s.from, end = s.from + Math.min(s.seeds, limit); from < end && found === undefined; ) {
        const args = ['packages/sim/dist/cli.js', '--seeds', String(end - from), '--from', String(from), '--nodes', String(s.nodes), '--trace', '0', ...swarm];
        const r = spawnSync(process.execPath, args, { cwd: scratch, encoding: 'utf8' });
        const m = /^seed (\d+): FAILED.*\n(?:swarm profile: .*\n)?(.*)/m.exec(r.stdout);
        if (m === null) break;
        if (passesOnBaseline(m[1], s.nodes)) found = `${swarm.length > 0 ? 'swarm ' : ''}seed ${m[1]} (${s.nodes} nodes): ${m[2].slice(0, 160)}`;
        else console.log(`${name}: seed ${m[1]} fails with the fix in place too: ${m[2].slice(0, 160)}`);
        from = Number(m[1]) + 1;
      }
      if (found !== undefined) break;
    }
    const seconds = ((performance.now() - t0) / 1000).toFixed(1);
    console.log(`${name}: ${found ?? 'NOT FOUND in the seeds searched'} (${seconds} s)`);
  }
} finally {
  for (const dir of [scratch, baseline]) {
    execSync(`git worktree remove --force ${dir}`, { cwd: repo, stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  }
}
