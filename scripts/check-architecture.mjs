#!/usr/bin/env node
// Architecture checks that lint rules do not cover well, over the TypeScript
// sources of packages/*/src:
//
//   1. No import cycles between modules (type-only imports count too: a cycle
//      of types is still two modules that cannot be understood apart).
//
// Usage: node scripts/check-architecture.mjs [root]   (exit 1 on a violation)
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/** Every .ts file (not .d.ts) under `dir`. */
function sources(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sources(path));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

/** The module graph: file -> files it imports (relative imports only; packages import each other by name). */
export function importGraph(files) {
  const known = new Set(files);
  const graph = new Map();
  for (const file of files) {
    const deps = [];
    for (const ref of ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles) {
      if (!ref.fileName.startsWith('.')) continue;
      const target = resolve(dirname(file), ref.fileName).replace(/\.js$/, '.ts');
      if (known.has(target)) deps.push(target);
    }
    graph.set(file, deps);
  }
  return graph;
}

/** Strongly connected components with more than one module, or a module importing itself (Tarjan). */
export function cycles(graph) {
  let next = 0;
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const found = [];
  const visit = (v) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
    }
    if (low.get(v) === index.get(v)) {
      const scc = [];
      let w;
      do {
        w = stack.pop();
        onStack.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(scc.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

/** Source files of every package under `root`. */
export function packageSources(root) {
  const pkgs = join(root, 'packages');
  return readdirSync(pkgs)
    .map((p) => join(pkgs, p, 'src'))
    .filter((src) => statSync(src, { throwIfNoEntry: false })?.isDirectory())
    .flatMap(sources);
}

/** Every violation under `root`, as lines for a person to read. */
export function check(root) {
  const problems = [];
  for (const scc of cycles(importGraph(packageSources(root)))) {
    problems.push(`import cycle: ${scc.map((f) => relative(root, f)).join(' <-> ')}`);
  }
  return problems;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const root = resolve(process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), '..'));
  const problems = check(root);
  for (const p of problems) console.error(p);
  if (problems.length > 0) process.exit(1);
  console.log('architecture: no import cycles');
}
