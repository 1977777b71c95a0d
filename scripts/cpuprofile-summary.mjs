#!/usr/bin/env node
// Summarises a V8 .cpuprofile (node --cpu-prof): self time per function,
// as a share of the busy (non-idle) time. Used for docs/benchmarks.md.
//
//   node scripts/cpuprofile-summary.mjs FILE.cpuprofile [top=40]
import { readFileSync } from 'node:fs';

const [file, topArg] = process.argv.slice(2);
if (!file) {
  console.error('usage: cpuprofile-summary.mjs FILE.cpuprofile [top]');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, 'utf8'));
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map();
// Sample i lasted timeDeltas[i + 1] (the delta before the next sample).
const deltas = profile.timeDeltas;
for (let i = 0; i < profile.samples.length; i++) {
  const node = byId.get(profile.samples[i]);
  const dt = deltas[i + 1] ?? 0;
  const cf = node.callFrame;
  const where = cf.url ? `${cf.url.replace(/^.*\/(packages|node_modules)\//, '$1/')}:${cf.lineNumber + 1}` : '';
  const name = `${cf.functionName || '(anonymous)'} ${where}`.trim();
  self.set(name, (self.get(name) ?? 0) + dt);
}
let total = 0;
let idle = 0;
for (const [name, t] of self) {
  total += t;
  if (name === '(idle)') idle += t;
}
const busy = total - idle;
console.log(`total ${(total / 1e3).toFixed(0)} ms, idle ${(idle / 1e3).toFixed(0)} ms, busy ${(busy / 1e3).toFixed(0)} ms`);
const rows = [...self].filter(([n]) => n !== '(idle)').sort((a, b) => b[1] - a[1]).slice(0, Number(topArg ?? 40));
for (const [name, t] of rows) console.log(`${((100 * t) / busy).toFixed(1).padStart(5)}%  ${(t / 1e3).toFixed(0).padStart(6)} ms  ${name}`);
