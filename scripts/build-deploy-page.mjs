#!/usr/bin/env node
// Builds the deployment page as one self-contained HTML file (styles and
// scripts inline, nothing fetched), for the docs or a machine with no node:
//   node scripts/build-deploy-page.mjs [OUT]   (default packages/web/dist/ticketing-deploy.html)
// Needs the build (`npx tsc -b`) first. The page's modules are joined in
// dependency order with their import lines and export keywords taken out;
// any module shape this simple joiner does not understand stops the build.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const web = new URL('../packages/web/', import.meta.url);
const out = process.argv[2] ?? fileURLToPath(new URL('dist/ticketing-deploy.html', web));
const IMPORT = /^import \{[^}]*\} from '\.\/([\w.-]+\.js)';$/;

function fail(message) {
  console.error(`build-deploy-page: ${message}`);
  process.exit(1);
}

/** The module and everything it imports, dependencies first, each once. */
function join(file, done = new Set(), parts = []) {
  if (done.has(file)) return parts;
  done.add(file);
  const body = [];
  for (const line of readFileSync(new URL(`dist/${file}`, web), 'utf8').split('\n')) {
    const m = IMPORT.exec(line);
    if (m !== null) join(m[1], done, parts);
    else if (/^import\b|^export (\{|\*|default)|\bimport\(/.test(line)) fail(`${file}: cannot inline "${line}"`);
    else if (!line.startsWith('//# sourceMappingURL')) body.push(line.replace(/^export /, ''));
  }
  parts.push(`// ${file}\n${body.join('\n')}`);
  return parts;
}

const script = join('deploy.js').join('\n');
const names = [...script.matchAll(/^(?:async )?(?:function\*? |const |let |var |class )(\w+)/gm)].map((m) => m[1]);
const clash = names.find((n, i) => names.indexOf(n) !== i);
if (clash !== undefined) fail(`two modules declare "${clash}" at top level; rename one`);
if (/<\/script/i.test(script)) fail('a script contains "</script"');

let html = readFileSync(new URL('public/deploy.html', web), 'utf8');
const css = readFileSync(new URL('public/style.css', web), 'utf8');
const swap = (tag, replacement) => {
  if (!html.includes(tag)) fail(`deploy.html has no ${tag}`);
  html = html.replace(tag, () => replacement);
};
swap('<link rel="stylesheet" href="/assets/style.css">', `<style>\n${css}</style>`);
swap('<script type="module" src="/assets/deploy.js"></script>', `<script type="module">\n${script}\n</script>`);
writeFileSync(out, html);
console.log(`wrote ${out}`);
