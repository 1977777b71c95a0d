/**
 * The dashboard and deployment pages, from the @ticketing/web package: its
 * HTML and CSS as written (public/), its scripts as compiled (dist/).
 * Loaded once at start; they are small.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface Asset {
  readonly body: Buffer;
  readonly type: string;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
};

/** URL path -> asset: `/` the dashboard, `/deploy` the deployment page, `/assets/NAME` the rest. */
export function loadWebAssets(): Map<string, Asset> {
  const root = dirname(fileURLToPath(import.meta.resolve('@ticketing/web/package.json')));
  const assets = new Map<string, Asset>();
  const add = (dir: string, urlOf: (name: string) => string) => {
    for (const name of readdirSync(join(root, dir))) {
      const type = TYPES[name.slice(name.lastIndexOf('.'))];
      if (type !== undefined) assets.set(urlOf(name), { body: readFileSync(join(root, dir, name)), type });
    }
  };
  add('public', (name) => (name === 'dashboard.html' ? '/' : name === 'deploy.html' ? '/deploy' : `/assets/${name}`));
  add('dist', (name) => `/assets/${name}`);
  return assets;
}
