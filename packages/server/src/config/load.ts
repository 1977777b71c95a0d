/**
 * Builds the configuration from a YAML file and flags (flags win), validated
 * by the one schema. A bad value becomes a ConfigError whose message is one
 * line naming the key, the value and what is allowed.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { CONFIG_KEYS, configSchema, type Config } from './schema.js';

/** Kept here too: config loading is where callers (the CLI) look for it. */
export { ConfigError };

/** The node's settings after defaults and derived values. */
export interface ServerConfig extends Config {
  node: string;
}

function show(value: unknown): string {
  const text = typeof value === 'string' ? JSON.stringify(value) : JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

function describeIssue(issue: z.core.$ZodIssue, input: Record<string, unknown>, source: string): string {
  const key = String(issue.path[0] ?? '');
  if (issue.code === 'unrecognized_keys') {
    return `unknown ${source === 'flags' ? 'option' : 'key'} ${issue.keys.map((k) => `"${k}"`).join(', ')} in ${source}; known keys: ${CONFIG_KEYS.join(', ')}`;
  }
  const where = source === 'flags' ? `--${key}` : `${key} in ${source}`;
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
    throw new ConfigError(`config file ${path} is not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  if (data === null || data === undefined) return {};
  if (typeof data !== 'object' || Array.isArray(data)) throw new ConfigError(`config file ${path} must be a YAML mapping of keys to values`);
  return data as Record<string, unknown>;
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
export function loadConfig(flags: Record<string, unknown>, configFile?: string): ServerConfig {
  const fromFile = configFile === undefined ? {} : readConfigFile(configFile);
  if (configFile !== undefined) validateConfig(fromFile, configFile);
  validateConfig(flags, 'flags');
  const merged = validateConfig({ ...fromFile, ...flags }, configFile ?? 'flags');
  return checkConsistency(merged);
}

function checkConsistency(config: Config): ServerConfig {
  const node = config.node ?? defaultNodeName();
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
    if (config.peers.length > 1 && config['peer-token'] === undefined && config['tls-cert'] === undefined && !config['insecure-peers']) {
      throw new ConfigError(
        'invalid peers: a cluster needs peer-token (or peer-token-file) or tls-cert/tls-key/tls-ca so that only its nodes can join; --insecure-peers allows neither (loopback tests only)',
      );
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
