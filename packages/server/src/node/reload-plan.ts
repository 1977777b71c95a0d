/**
 * What a reload (SIGHUP) can apply to a running node, and what it cannot.
 * A changed setting outside RELOADABLE keeps its running value, and the
 * reload says so by name (never by value: some are secrets) instead of
 * claiming success.
 */
import type { ServerConfig } from '../config/load.js';
import type { ConfigKey } from '../config/schema.js';
import { CONFIG_KEYS } from '../config/schema.js';

/** Keys a running node applies on reload (certificate files are re-read whatever their names). */
export const RELOADABLE: ReadonlySet<ConfigKey> = new Set<ConfigKey>([
  'client-tokens',
  'client-tokens-file',
  'tls-cert',
  'tls-key',
  'tls-ca',
  'tls-peer-ca',
  'peer-token',
  'peer-token-file',
  'peer-token-next',
  'peer-token-next-file',
  'max-locks',
  'max-waiters-per-key',
  'max-waiters',
  'max-pending-per-conn',
  'max-conns',
  'max-conns-per-address',
  'idle-timeout',
  'line-timeout',
  'hello-timeout',
  'log-level',
]);

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** The configuration to run with after a reload, and the changed keys that need a restart. */
export function planReload(running: ServerConfig, next: ServerConfig): { config: ServerConfig; needsRestart: ConfigKey[] } {
  const needsRestart = CONFIG_KEYS.filter((k) => !RELOADABLE.has(k) && !same(running[k], next[k]));
  const config: ServerConfig = { ...running, clientIdentities: next.clientIdentities };
  const target = config as unknown as Record<string, unknown>;
  for (const k of RELOADABLE) target[k] = next[k];
  return { config, needsRestart };
}
