/**
 * What a node warns about when it starts (it starts all the same): files
 * holding secrets, or the config, that other users of the machine can read
 * or change; a data directory others can read; a client listener off
 * loopback that takes anyone; secrets too short to resist guessing. Each
 * warning names the file or key, never a secret.
 */
import { statSync } from 'node:fs';
import { isLoopbackHost, splitHostPort } from '../net/address.js';
import type { ServerConfig } from './load.js';
import { GENERATE_SECRET, MIN_SECRET_BITS, strongEnough } from './secret-strength.js';

export interface StartWarning {
  readonly fields: Record<string, unknown>;
  readonly message: string;
}

/** Group or world bits of `path`'s mode, or undefined when it cannot be read (missing: another check says so). */
function openBits(path: string): number | undefined {
  try {
    return statSync(path).mode & 0o077;
  } catch {
    return undefined;
  }
}

function fileWarning(what: string, path: string): StartWarning | undefined {
  const bits = openBits(path);
  if (bits === undefined || bits === 0) return undefined;
  const how = bits & 0o022 ? (bits & 0o044 ? 'readable and writable' : 'writable') : 'readable';
  return {
    fields: { file: path, mode: `0${(bits | 0o600).toString(8)}` },
    message: `${what} is ${how} by other users of this machine: chmod 600 it (owned by the service user)`,
  };
}

export function startWarnings(config: ServerConfig, configFile: string | undefined): StartWarning[] {
  const out: Array<StartWarning | undefined> = [];
  if (configFile !== undefined) out.push(fileWarning('the config file', configFile));
  const secretFiles: Array<[string, string | undefined]> = [
    ['peer-token-file', config['peer-token-file']],
    ['peer-token-next-file', config['peer-token-next-file']],
    ['http-token-file', config['http-token-file']],
    ['client-tokens-file', config['client-tokens-file']],
    ['tls-key', config['tls-key']],
    ...config['client-tokens'].flatMap((e): Array<[string, string | undefined]> => (typeof e === 'string' ? [] : [[`token-file of client identity ${e.name}`, e['token-file']]])),
  ];
  for (const [what, path] of secretFiles) if (path !== undefined) out.push(fileWarning(`${what} (a secret)`, path));
  if (!config.memory) {
    const bits = openBits(config['data-dir']);
    if (bits !== undefined && bits !== 0) {
      out.push({ fields: { dataDir: config['data-dir'] }, message: 'the data directory is open to other users of this machine (it holds every key and who holds it): chmod 700 it' });
    }
  }
  const { host } = splitHostPort(config.listen);
  if (config.clientIdentities.length === 0 && !isLoopbackHost(host)) {
    out.push({ fields: { listen: config.listen }, message: 'client listener off loopback without client tokens: anyone who reaches it can take and release any lock (set client-tokens)' });
  }
  const weak = [
    ...(config['http-token'] !== undefined && !strongEnough(config['http-token']) ? ['http-token'] : []),
    ...config.clientIdentities.filter((e) => !strongEnough(e.token)).map((e) => (e.name === undefined ? 'a bare client token' : `client identity ${e.name}`)),
  ];
  if (weak.length > 0) {
    out.push({ fields: { secrets: weak }, message: `secrets under ${MIN_SECRET_BITS} bits can be guessed: ${weak.join(', ')} (generate with: ${GENERATE_SECRET})` });
  }
  return out.filter((w): w is StartWarning => w !== undefined);
}
