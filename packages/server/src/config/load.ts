/**
 * Builds the configuration from a YAML file and flags (flags win), validated
 * by the one schema. A bad value becomes a ConfigError whose message is one
 * line naming the key, the value and what is allowed.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, isAbsolute, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { isLoopbackHost, splitHostPort } from '../net/address.js';
import { CONFIG_KEYS, configSchema, type Config } from './schema.js';
import { GENERATE_SECRET, MIN_SECRET_BITS, strongEnough } from './secret-strength.js';

/** Kept here too: config loading is where callers (the CLI) look for it. */
export { ConfigError };

/** A client token with what it may do: a named identity (keys: its key prefixes), or a bare token (all keys). */
export interface ClientTokenEntry {
  readonly name: string | undefined;
  readonly token: string;
  readonly keys: readonly string[] | undefined;
}

/** The node's settings after defaults and derived values. */
export interface ServerConfig extends Config {
  node: string;
  /** Every client token, from client-tokens (tokens and token files) and client-tokens-file. */
  clientIdentities: readonly ClientTokenEntry[];
}

/** Keys whose values are secrets: an error names the key, never the value. */
const SECRET_KEYS = new Set(['client-tokens', 'peer-token', 'peer-token-next', 'http-token']);
/** Environment variables that may hold a secret instead of a flag (a flag wins; they win over the file). */
export const SECRET_ENV: Readonly<Record<string, string>> = {
  'client-tokens': 'TICKETING_CLIENT_TOKENS',
  'peer-token': 'TICKETING_PEER_TOKEN',
  'peer-token-next': 'TICKETING_PEER_TOKEN_NEXT',
  'http-token': 'TICKETING_HTTP_TOKEN',
};

function show(value: unknown): string {
  const text = typeof value === 'string' ? JSON.stringify(value) : JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** Edit distance, for "did you mean". */
function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}

/** The known key closest to `key`, when it is close enough to be a typo. */
export function closestKey(key: string): string | undefined {
  const [best] = CONFIG_KEYS.map((k) => [k, distance(key, k)] as const).sort((x, y) => x[1] - y[1]);
  return best !== undefined && best[1] <= Math.max(2, Math.floor(key.length / 4)) ? best[0] : undefined;
}

function describeIssue(issue: z.core.$ZodIssue, input: Record<string, unknown>, source: string): string {
  const key = String(issue.path[0] ?? '');
  if (issue.code === 'unrecognized_keys') {
    const unknown = issue.keys[0]!;
    const guess = closestKey(unknown);
    const hint = guess === undefined ? '' : ` did you mean "${guess}"?`;
    return `unknown ${source === 'flags' ? 'option' : 'key'} "${unknown}" in ${source}:${hint} (docs/configuration.md lists every key)`;
  }
  const where = source === 'flags' ? `--${key}` : `${key} in ${source}`;
  // A secret is never echoed (error lines reach logs and terminals): only where it is and what is wrong.
  if (SECRET_KEYS.has(key)) return `invalid ${where}: (secret, not shown) ${issue.message}`;
  return `invalid ${where}: ${show(input[key])} ${issue.message}`;
}

/** Validates a partial config (from a file or flags). */
export function validateConfig(input: Record<string, unknown>, source: string): Config {
  const result = configSchema.safeParse(input);
  if (!result.success) throw new ConfigError(describeIssue(result.error.issues[0]!, input, source));
  return result.data;
}

export function readConfigFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read config file ${path}: ${(err as Error).message}`);
  }
  let data: unknown;
  try {
    data = parseYaml(text);
  } catch (err) {
    // The parser's message ends with a code frame (the line, a caret under the column): keep it.
    throw new ConfigError(`config file ${path} is not valid YAML: ${(err as Error).message.trimEnd()}`);
  }
  if (data === null || data === undefined) return {};
  if (typeof data !== 'object' || Array.isArray(data)) throw new ConfigError(`config file ${path} must be a YAML mapping of keys to values`);
  return data as Record<string, unknown>;
}

/** Keys whose values are file or directory paths: in a config file they are relative to the file. */
const PATH_KEYS = ['data-dir', 'client-tokens-file', 'peer-token-file', 'peer-token-next-file', 'http-token-file', 'tls-cert', 'tls-key', 'tls-ca', 'tls-peer-ca'] as const;

/**
 * Resolves the relative paths of a config file against the file's directory,
 * as a reader of the file expects (a systemd unit runs in /, not beside it).
 * Flags stay relative to the working directory, as for any command.
 */
function resolvePaths(fromFile: Record<string, unknown>, file: string): Record<string, unknown> {
  const base = dirname(resolve(file));
  const at = (p: unknown) => (typeof p === 'string' && p !== '' && !isAbsolute(p) ? resolve(base, p) : p);
  const out: Record<string, unknown> = { ...fromFile };
  for (const key of PATH_KEYS) if (key in out) out[key] = at(out[key]);
  const tokens = out['client-tokens'];
  if (Array.isArray(tokens)) {
    out['client-tokens'] = tokens.map((e: unknown) =>
      e !== null && typeof e === 'object' && 'token-file' in e ? { ...e, 'token-file': at((e as Record<string, unknown>)['token-file']) } : e,
    );
  }
  return out;
}

/** A default node name: the host name, cut to what a node name allows. */
export function defaultNodeName(): string {
  const name = hostname().replace(/[^A-Za-z0-9._-]/g, '-').replace(/^[^A-Za-z0-9]+/, '').slice(0, 63);
  return name === '' ? 'ticketing' : name;
}

/**
 * File values, then flag values over them, then checks across keys. `flags`
 * holds only the flags actually given.
 */
export function loadConfig(flags: Record<string, unknown>, configFile?: string, env: Readonly<Record<string, string | undefined>> = {}): ServerConfig {
  const fromFile = configFile === undefined ? {} : readConfigFile(configFile);
  if (configFile !== undefined) validateConfig(fromFile, configFile);
  if (configFile !== undefined) Object.assign(fromFile, resolvePaths(fromFile, configFile));
  const fromEnv: Record<string, unknown> = {};
  for (const [key, variable] of Object.entries(SECRET_ENV)) {
    const value = env[variable];
    if (value !== undefined && value !== '') fromEnv[key] = value;
  }
  validateConfig(fromEnv, 'the environment');
  validateConfig(flags, 'flags');
  const merged = validateConfig({ ...fromFile, ...fromEnv, ...flags }, configFile ?? 'flags');
  return checkConsistency(resolveSecretFiles(merged));
}

/** Reads a secret from a file: trimmed, one word; errors name the key and the file, never the content. */
function readSecretFile(key: string, path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read ${key} ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const secret = text.trim();
  // eslint-disable-next-line no-control-regex
  if (!/^[^\s\x00-\x1f\x7f]{1,200}$/.test(secret)) throw new ConfigError(`invalid ${key} ${path}: the file must hold one secret of 1..200 characters without spaces or control characters`);
  return secret;
}

/** peer-token-file, http-token-file, client-tokens-file and identities' token-file, read now (and again on every reload). */
function resolveSecretFiles(config: Config): Config & { clientIdentities: ClientTokenEntry[] } {
  const out: Config = { ...config };
  for (const key of ['peer-token', 'peer-token-next', 'http-token'] as const) {
    const file = config[`${key}-file`];
    if (file === undefined) continue;
    if (config[key] !== undefined) throw new ConfigError(`invalid ${key}-file: give ${key} or ${key}-file, not both`);
    out[key] = readSecretFile(`${key}-file`, file);
  }
  const identities: ClientTokenEntry[] = config['client-tokens'].map((entry, i) => {
    if (typeof entry === 'string') return { name: undefined, token: entry, keys: undefined };
    if ((entry.token === undefined) === (entry['token-file'] === undefined)) {
      throw new ConfigError(`invalid client-tokens entry ${i + 1} (${entry.name}): give token or token-file, exactly one`);
    }
    // An identity that may use every key must say so: a forgotten `keys` used to mean "everything", silently.
    if (entry.keys === undefined || entry.keys.length === 0) {
      throw new ConfigError(`invalid client-tokens entry ${i + 1} (${entry.name}): give keys, the key prefixes it may use (keys: [''] for every key)`);
    }
    const token = entry.token ?? readSecretFile(`token-file of client-tokens entry ${entry.name}`, entry['token-file']!);
    return { name: entry.name, token, keys: entry.keys };
  });
  const file = config['client-tokens-file'];
  if (file !== undefined) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new ConfigError(`cannot read client-tokens-file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    text.split('\n').forEach((raw, i) => {
      const line = raw.trim();
      if (line === '' || line.startsWith('#')) return;
      // eslint-disable-next-line no-control-regex
      if (!/^[^\s\x00-\x1f\x7f]{1,200}$/.test(line)) throw new ConfigError(`invalid client-tokens-file ${file} line ${i + 1}: a token is 1..200 characters without spaces`);
      identities.push({ name: undefined, token: line, keys: undefined });
    });
  }
  const names = identities.map((e) => e.name).filter((n) => n !== undefined);
  const dup = names.find((n, i) => names.indexOf(n) !== i);
  if (dup !== undefined) throw new ConfigError(`invalid client-tokens: identity name "${dup}" appears twice`);
  const tokens = identities.map((e) => e.token);
  if (tokens.some((t, i) => tokens.indexOf(t) !== i)) throw new ConfigError('invalid client-tokens: two entries have the same token (an identity must be told apart by its token)');
  return { ...out, clientIdentities: identities };
}

function checkConsistency(config: Config & { clientIdentities: ClientTokenEntry[] }): ServerConfig {
  const node = config.node ?? defaultNodeName();
  for (const key of ['peer-token', 'peer-token-next'] as const) {
    const token = config[key];
    // A handshake lets whoever sees it test guesses offline: a guessable token is no protection at all.
    if (token !== undefined && !strongEnough(token)) {
      throw new ConfigError(`invalid ${key}: (secret, not shown) it must carry at least ${MIN_SECRET_BITS} bits, e.g. 32 hex digits; generate one with: ${GENERATE_SECRET}`);
    }
  }
  if ((config['tls-cert'] === undefined) !== (config['tls-key'] === undefined)) {
    throw new ConfigError('invalid TLS settings: tls-cert and tls-key must be given together');
  }
  if (config.mode === 'raft' && config.memory) {
    throw new ConfigError('invalid memory: raft mode keeps its term, vote and log on disk; give it a data-dir instead of --memory');
  }
  if (config.peers.length > 0) {
    const names = config.peers.map((p) => p.slice(0, p.indexOf('=')));
    const dup = names.find((n, i) => names.indexOf(n) !== i);
    if (dup !== undefined) throw new ConfigError(`invalid peers: node name "${dup}" appears twice`);
    if (config.node === undefined) throw new ConfigError(`invalid node: a cluster needs --node, one of ${names.join(', ')}`);
    if (!names.includes(node)) throw new ConfigError(`invalid node: "${node}" is not one of the peers (${names.join(', ')})`);
    if (config.peers.length > 16 && config.mode === 'priority') {
      throw new ConfigError(`invalid peers: a priority cluster has at most 16 nodes (got ${config.peers.length})`);
    }
    const standbys = config.peers.length - 1;
    const sync = config['sync-standbys'];
    if (sync > standbys) {
      throw new ConfigError(`invalid sync-standbys: ${sync} is more than the ${standbys} standbys this cluster has (replies would wait forever)`);
    }
    if (sync > 0 && sync === standbys && !config['sync-standbys-allow-stall']) {
      throw new ConfigError(
        `invalid sync-standbys: ${sync} with ${standbys} standby${standbys === 1 ? '' : 's'} means a single failure would stop the cluster (every reply waits for all of them); use at most ${standbys - 1}, or add --sync-standbys-allow-stall to accept that`,
      );
    }
    if (config['peer-token-next'] !== undefined && config['peer-token'] === undefined) {
      throw new ConfigError('invalid peer-token-next: it is the token a rotation moves to, beside peer-token; give peer-token too');
    }
    const plainPeers = config.peers.length > 1 && config['peer-token'] === undefined && config['tls-cert'] === undefined;
    if (plainPeers && !config['insecure-peers']) {
      throw new ConfigError(
        'invalid peers: a cluster needs peer-token (or peer-token-file) or tls-cert/tls-key/tls-ca so that only its nodes can join; --insecure-peers allows neither (loopback tests only)',
      );
    }
    if (plainPeers) {
      // Plain peer links carry the lock table unauthenticated: only where nothing off the machine can reach them.
      const hosts = [splitHostPort(config['peer-listen'] ?? config.listen).host, ...config.peers.map((p) => splitHostPort(p.slice(p.indexOf('=') + 1)).host)];
      const outside = hosts.find((h) => !isLoopbackHost(h));
      if (outside !== undefined) {
        throw new ConfigError(`invalid insecure-peers: it allows plain peer links on loopback addresses only, and ${outside} is not one; give the nodes a peer-token (${GENERATE_SECRET})`);
      }
    }
    if (config['tls-cert'] !== undefined && config['tls-ca'] === undefined && config['tls-peer-ca'] === undefined) {
      throw new ConfigError('invalid TLS settings: a cluster with tls-cert needs tls-ca, to verify its peers');
    }
    if (config['failover-timeout'] < 2 * config['heartbeat-interval']) {
      throw new ConfigError(
        `invalid failover-timeout: ${config['failover-timeout']} must be at least twice heartbeat-interval (${config['heartbeat-interval']})`,
      );
    }
  }
  return { ...config, node };
}
