#!/usr/bin/env node
// `npm run soak`: the simulator's long seed ranges, which CI no longer runs (CI runs the pinned
// regression seeds and a window of fresh seeds per commit). Each of the six configurations over
// its fixed range, --keep-going, two at a time by default; a table at the end, and a failing
// seed's replay command in its log. The last result is recorded in docs/verify.md.
//
//   npm run soak                       # the ranges below (about 10 min of one core each at scale 1)
//   npm run soak -- --scale 10         # ten times the seeds of each range
//   npm run soak -- --jobs 1 --only swarm
// Run it at low priority beside other work: nice -n 19 npm run soak
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

const RANGES = [
  // name, first seed, seeds at scale 1, simulator flags
  ['raft, 3 nodes', 1, 1_000, ['--nodes', '3']],
  ['raft, 5 nodes', 100_001, 300, ['--nodes', '5']],
  ['raft, swarm, 3 nodes', 1, 800, ['--nodes', '3', '--swarm']],
  ['raft, swarm, 5 nodes', 100_001, 200, ['--nodes', '5', '--swarm']],
  ['priority', 200_001, 1_000, ['--mode', 'priority']],
  ['priority, swarm', 200_001, 500, ['--mode', 'priority', '--swarm']],
  ['priority, 5 nodes', 300_001, 300, ['--mode', 'priority', '--nodes', '5']],
  ['priority, OS suspends', 400_001, 500, ['--mode', 'priority', '--os-suspend']],
];

const { values } = parseArgs({
  options: {
    scale: { type: 'string', default: '1' },
    jobs: { type: 'string', default: '2' },
    only: { type: 'string' },
  },
});
const scale = Number(values.scale);
const jobs = Number(values.jobs);
if (!(scale > 0) || !Number.isInteger(jobs) || jobs < 1) {
  console.error('usage: npm run soak -- [--scale N] [--jobs N] [--only TEXT]');
  process.exit(2);
}
const root = fileURLToPath(new URL('..', import.meta.url));
const chosen = RANGES.filter(([name]) => values.only === undefined || name.includes(values.only));
const results = [];
const queue = [...chosen];
const t0 = Date.now();

async function worker() {
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    const [name, from, seeds, flags] = next;
    const count = Math.round(seeds * scale);
    const args = ['packages/sim/dist/cli.js', '--seeds', String(count), '--from', String(from), ...flags, '--keep-going'];
    const started = Date.now();
    console.log(`soak: ${name}: npm run sim -- ${args.slice(1).join(' ')}`);
    const child = spawn(process.execPath, args, { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      process.stdout.write(d);
    });
    const code = await new Promise((resolve) => child.once('exit', (c, s) => resolve(c ?? s)));
    const summary = out.trim().split('\n').at(-1) ?? '';
    const failedSeeds = [...out.matchAll(/^seed (\d+): FAILED/gm)].map((m) => m[1]);
    results.push({ name, range: `${from}-${from + count - 1}`, code, s: (Date.now() - started) / 1000, summary, failedSeeds });
  }
}
await Promise.all(Array.from({ length: Math.min(jobs, chosen.length) }, worker));

console.log('\nsoak results');
for (const r of results) {
  console.log(`${r.name.padEnd(22)} seeds ${r.range.padEnd(16)} ${r.code === 0 ? 'all passed' : `FAILED: ${r.failedSeeds.join(', ') || r.code}`}  ${r.s.toFixed(0)} s`);
}
console.log(`${results.reduce((a, r) => a + Number(/^(\d+)/.exec(r.summary)?.[1] ?? 0), 0)} seeds in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
process.exit(results.every((r) => r.code === 0) ? 0 : 1);
