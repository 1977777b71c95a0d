#!/usr/bin/env node
// Architecture checks that lint rules do not cover well, over the TypeScript
// sources of packages/*/src:
//
//   1. No import cycles between modules (type-only imports count too: a cycle
//      of types is still two modules that cannot be understood apart).
//   2. Seams (packages/server/src): time, timers, sockets, files and randomness
//      are reached only through the node's Clock, Transport and Disk (and its
//      random function), whose real implementations live in src/seams/. Any
//      other use is a violation unless SEAM_ALLOWED says why it is fine.
//
// Usage: node scripts/check-architecture.mjs [root]   (exit 1 on a violation)
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
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

/** Server files (relative to packages/server/src) that may reach the world directly, and why. */
export const SEAM_ALLOWED = {
  'seams/system-clock.ts': 'the real Clock',
  'seams/net-transport.ts': 'the real Transport',
  'seams/node-disk.ts': 'the real Disk',
  'seams/file-lock.ts': "the real Disk's kernel file lock (a data directory's LOCK), and the process id it writes there for people",
  'seams/real-environment.ts': 'the real environment (Math.random)',
  'http/admin-server.ts': 'the admin HTTP listener stays on node:http: started by the CLI beside a node, not part of one; it sets no timers',
  'http/metrics.ts': 'admin listener only: free space of the data directory at scrape time (statfs)',
  'http/web-assets.ts': "reads the admin dashboard's static files once at start (admin listener only)",
  'config/load.ts': "reads the operator's YAML config file, before any node exists",
  'config/start-warnings.ts': 'reads the modes of the config, secret and data-directory paths once at start, before any node exists',
  'net/tls-config.ts': 'reads the certificate files the config names (start and reload); a simulated node runs without TLS',
  'version.ts': 'reads package.json once at import: build metadata, the same every run',
};

const BANNED_MODULES = new Set(['node:net', 'node:tls', 'node:fs', 'node:fs/promises', 'node:http', 'node:https', 'node:perf_hooks', 'node:dgram', 'node:timers', 'node:timers/promises']);
const BANNED_GLOBALS = new Set(['setTimeout', 'setInterval', 'setImmediate', 'clearTimeout', 'clearInterval', 'clearImmediate', 'queueMicrotask']);
const BANNED_MEMBERS = { Date: ['now'], performance: ['now'], Math: ['random'], process: ['on', 'once', 'addListener', 'kill', 'exit', 'pid', 'hrtime', 'nextTick'] };

/** Direct uses of the world in one source file, as [line, what]. */
export function worldUses(file) {
  const text = readFileSync(file, 'utf8');
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found = [];
  const at = (node, what) => found.push([sf.getLineAndCharacterOfPosition(node.getStart()).line + 1, what]);
  const visit = (node) => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) {
      const spec = node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier) ? node.moduleSpecifier.text : undefined;
      const typeOnly = ts.isImportDeclaration(node) ? node.importClause?.isTypeOnly === true : node.isTypeOnly;
      const name = spec?.startsWith('node:') ? spec : spec !== undefined ? `node:${spec}` : undefined;
      if (name !== undefined && BANNED_MODULES.has(name) && !typeOnly) at(node, `imports ${spec}`);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      at(node, 'dynamic import');
    } else if (ts.isIdentifier(node) && BANNED_GLOBALS.has(node.text)) {
      const parent = node.parent;
      const isMemberName = (ts.isPropertyAccessExpression(parent) && parent.name === node) || ts.isPropertyAssignment(parent) || ts.isMethodDeclaration(parent);
      if (!isMemberName) at(node, node.text);
    } else if (ts.isPropertyAccessExpression(node) && ts.isIdentifier(node.expression)) {
      const members = BANNED_MEMBERS[node.expression.text];
      if (members?.includes(node.name.text)) at(node, `${node.expression.text}.${node.name.text}`);
    } else if (ts.isNewExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'Date' && (node.arguments?.length ?? 0) === 0) {
      at(node, 'new Date()');
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
}

/** Every violation under `root`, as lines for a person to read. */
export function check(root) {
  const problems = [];
  for (const scc of cycles(importGraph(packageSources(root)))) {
    problems.push(`import cycle: ${scc.map((f) => relative(root, f)).join(' <-> ')}`);
  }
  const server = join(root, 'packages/server/src');
  if (statSync(server, { throwIfNoEntry: false })?.isDirectory()) {
    for (const file of sources(server)) {
      const rel = relative(server, file).split(sep).join('/');
      if (rel in SEAM_ALLOWED) continue;
      for (const [line, what] of worldUses(file)) {
        problems.push(`seam bypassed: packages/server/src/${rel}:${line} uses ${what} (go through the node's Clock, Transport, Disk or random; or say why in SEAM_ALLOWED)`);
      }
    }
  }
  return problems;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const root = resolve(process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), '..'));
  const problems = check(root);
  for (const p of problems) console.error(p);
  if (problems.length > 0) process.exit(1);
  console.log('architecture: no import cycles; server code reaches time, network and files only through its seams');
}
