/**
 * TLS material from the configuration, read and checked up front so that a
 * missing file or a key that does not match its certificate stops the start
 * (or a reload) with one clear line instead of failing on the first client.
 */
import { readFileSync } from 'node:fs';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import { ConfigError } from '../config/load.js';
import type { Config } from '../config/schema.js';

export interface TlsMaterial {
  readonly context: SecureContextOptions;
  /** Client certificates must be presented and verified against tls-ca. */
  readonly requireClientCert: boolean;
  readonly handshakeTimeoutMs: number;
}

/** Reads a PEM file named by config key `key`; a failure is a ConfigError naming the key. */
export function readTlsFile(key: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new ConfigError(`cannot read ${key} ${path}: ${(err as Error).message}`);
  }
}

/** The TLS settings of `config`, or undefined when it serves plain TCP. */
export function loadTls(config: Config): TlsMaterial | undefined {
  const certPath = config['tls-cert'];
  const keyPath = config['tls-key'];
  if (certPath === undefined || keyPath === undefined) return undefined;
  const context: SecureContextOptions = {
    cert: readTlsFile('tls-cert', certPath),
    key: readTlsFile('tls-key', keyPath),
    ...(config['tls-ca'] === undefined ? {} : { ca: readTlsFile('tls-ca', config['tls-ca']) }),
    minVersion: 'TLSv1.2',
  };
  try {
    createSecureContext(context);
  } catch (err) {
    throw new ConfigError(`invalid TLS settings (tls-cert ${certPath}, tls-key ${keyPath}): ${(err as Error).message}`);
  }
  if (config['tls-require-client-cert'] && config['tls-ca'] === undefined) {
    throw new ConfigError('invalid TLS settings: tls-require-client-cert needs tls-ca to verify client certificates');
  }
  return { context, requireClientCert: config['tls-require-client-cert'], handshakeTimeoutMs: config['tls-handshake-timeout'] };
}

/**
 * The context for peer links: the node's certificate, verifying peers against
 * `tls-peer-ca` when set (a CA of the peers' own), else against `tls-ca`.
 * `ownCa` says which (peer-identity.ts then also checks the names).
 */
export function loadPeerTlsContext(config: Config): { context: SecureContextOptions; ownCa: boolean } | undefined {
  const tls = loadTls(config);
  if (tls === undefined) return undefined;
  const peerCa = config['tls-peer-ca'];
  if (peerCa === undefined) return { context: tls.context, ownCa: false };
  const context = { ...tls.context, ca: readTlsFile('tls-peer-ca', peerCa) };
  try {
    createSecureContext(context);
  } catch (err) {
    throw new ConfigError(`invalid TLS settings (tls-peer-ca ${peerCa}): ${(err as Error).message}`);
  }
  return { context, ownCa: true };
}
