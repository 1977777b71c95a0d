/**
 * Checks and normalises what callers pass in, before anything is sent.
 * Durations are milliseconds, rounded UP to whole seconds on the wire;
 * out-of-range values are rejected, never clamped.
 */
import { MAX_LEASE_SECONDS, MAX_LINE_BYTES, MAX_WAIT_SECONDS, MIN_LEASE_SECONDS, isHostPort, keyError } from '@ticketing/protocol';
import { InvalidArgumentError } from './errors.js';

/** How connections are secured. `{ ca }` is a file path, or PEM text when it contains `-----BEGIN`. */
export type TlsOption = 'off' | 'system' | 'insecure' | { readonly ca: string };

export interface BrokerOptions {
  /** Secret sent in `H 1 <token>` on every connection (one of the server's `client_tokens`). */
  readonly token?: string;
  /** Default `'off'`. */
  readonly tls?: TlsOption;
}

export interface AcquireOptions {
  /** How long the server may queue the request: 0 (one immediate attempt) to 255 000 ms. Required. */
  readonly waitMs: number;
  /** Lease: 1 to 250 000 ms (rounded up, so 500 means 1 s). Required. */
  readonly leaseMs: number;
  /**
   * Least lease that must be left when the ticket is handed out: 0 (default) up to the rounded
   * lease, inclusive. A budget equal to the lease is sent but can never be met (time passes after
   * the send), so it always ends in `InsufficientLeaseError`: use a budget below the lease.
   */
  readonly minWorkMs?: number;
  /** Abort the acquire (see docs/client.md for what is sent). */
  readonly signal?: AbortSignal;
  /**
   * Keep the lock while the ticket is held: extend it by its lease once a
   * third of the lease has passed, again and again, until release (see
   * docs/client.md, long-running work). Default false.
   */
  readonly keepAlive?: boolean;
}

export interface AcquireRequest {
  readonly key: string;
  readonly waitSeconds: number;
  readonly leaseSeconds: number;
  readonly minWorkMs: number;
  readonly signal: AbortSignal | undefined;
  readonly keepAlive: boolean;
}

function invalid(message: string): never {
  throw new InvalidArgumentError(message);
}

export function checkKey(key: unknown): string {
  const problem = keyError(key as string);
  if (problem !== undefined) invalid(`bad key ${JSON.stringify(key)}: ${problem}`);
  return key as string;
}

/** A duration in ms, rounded up to whole seconds and checked against min..max seconds. */
function seconds(name: string, ms: unknown, min: number, max: number): number {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) invalid(`${name} must be a finite number of milliseconds >= 0, got ${String(ms)}`);
  const s = Math.ceil(ms / 1000);
  if (s < min || s > max) invalid(`${name} ${ms} rounds up to ${s} s; it must be ${min}..${max} s`);
  return s;
}

export function checkAcquire(key: unknown, options: AcquireOptions | undefined): AcquireRequest {
  checkKey(key);
  if (typeof options !== 'object' || options === null) invalid('acquire needs options { waitMs, leaseMs }');
  const waitSeconds = seconds('waitMs', options.waitMs, 0, MAX_WAIT_SECONDS);
  const leaseSeconds = seconds('leaseMs', options.leaseMs, MIN_LEASE_SECONDS, MAX_LEASE_SECONDS);
  const minWorkMs = options.minWorkMs ?? 0;
  // Up to the rounded lease, inclusive (CLIENT.md; seed 003 rejects only a
  // larger budget). A budget equal to the lease is sent but can never be met
  // (some time always passes after the send): the grant is released again.
  if (typeof minWorkMs !== 'number' || !Number.isFinite(minWorkMs) || minWorkMs < 0 || minWorkMs > leaseSeconds * 1000) {
    invalid(`minWorkMs must be 0..the rounded lease (${leaseSeconds * 1000} ms), got ${String(minWorkMs)}`);
  }
  const signal = options.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) invalid('signal must be an AbortSignal');
  const keepAlive = options.keepAlive ?? false;
  if (typeof keepAlive !== 'boolean') invalid(`keepAlive must be true or false, got ${String(keepAlive)}`);
  return { key: key as string, waitSeconds, leaseSeconds, minWorkMs, signal, keepAlive };
}

/** A lease in ms (an extension's): rounded up to whole seconds, 1..250 s. */
export function checkLeaseMs(name: string, ms: unknown): number {
  return seconds(name, ms, MIN_LEASE_SECONDS, MAX_LEASE_SECONDS);
}

/** The port used when an address names a host only. */
export const DEFAULT_PORT = 5225;

function checkAddress(a: unknown): string {
  if (typeof a !== 'string') invalid(`bad address ${JSON.stringify(a)}: expected host:port (IPv6 in brackets)`);
  if (isHostPort(a)) return a;
  // Only a plain host name, IPv4 address or bracketed IPv6 address: "h:" or "::1" stay errors.
  if (/^[A-Za-z0-9._-]+$/.test(a) || /^\[[0-9A-Za-z:.%]+\]$/.test(a)) return `${a}:${DEFAULT_PORT}`;
  return invalid(`bad address ${JSON.stringify(a)}: expected host or host:port (IPv6 in brackets)`);
}

const URL_SCHEME = 'ticketing://';

/** What a `ticketing://` URL says (the token and TLS option are undefined when it does not say). */
export interface Target {
  readonly addresses: string[];
  readonly token: string | undefined;
  readonly tls: TlsOption | undefined;
}

/**
 * `ticketing://[token@]host[:port][,host[:port]...][?tls=off|system|insecure][&ca=PATH]`: the
 * token and the CA path are percent-decoded; `ca` means `{ ca: PATH }`.
 */
function parseUrl(url: string): Target {
  const [authority = '', query = ''] = url.slice(URL_SCHEME.length).split('?', 2);
  const at = authority.lastIndexOf('@');
  const hosts = authority.slice(at + 1).replace(/\/$/, '');
  if (hosts === '') invalid(`bad URL ${JSON.stringify(url)}: no host`);
  let token: string | undefined;
  try {
    token = at < 0 ? undefined : decodeURIComponent(authority.slice(0, at));
  } catch {
    invalid(`bad URL ${JSON.stringify(url)}: the token is not percent-encoded correctly`);
  }
  let tls: TlsOption | undefined;
  for (const [name, value] of new URLSearchParams(query)) {
    if (name === 'tls' && (value === 'off' || value === 'system' || value === 'insecure')) tls = value;
    else if (name === 'ca' && value !== '') tls = { ca: value };
    else invalid(`bad URL ${JSON.stringify(url)}: unknown option ${name}=${value} (tls=off|system|insecure, ca=PATH)`);
  }
  return { addresses: hosts.split(',').map(checkAddress), token, tls };
}

/**
 * Checks `host:port` addresses (a bare host or `[IPv6]` gets port 5225, as on the JVM), or a
 * `ticketing://` URL.
 */
export function checkAddresses(addresses: unknown): Target {
  if (typeof addresses === 'string' && addresses.startsWith(URL_SCHEME)) return parseUrl(addresses);
  const list = typeof addresses === 'string' ? [addresses] : addresses;
  if (!Array.isArray(list) || list.length === 0) invalid('connect needs a "host:port", a non-empty list of them, or a ticketing:// URL');
  return { addresses: list.map(checkAddress), token: undefined, tls: undefined };
}

/** An option given both in the URL and in `options` must agree. */
export function mergeUrlOptions(target: Target, options: BrokerOptions | undefined): BrokerOptions {
  const pick = <K extends 'token' | 'tls'>(name: K): BrokerOptions[K] => {
    const given = options?.[name];
    const fromUrl = target[name];
    if (given !== undefined && fromUrl !== undefined && JSON.stringify(given) !== JSON.stringify(fromUrl)) {
      invalid(`${name} is given both in the URL and in the options, with different values`);
    }
    return given ?? fromUrl;
  };
  return { ...options, token: pick('token'), tls: pick('tls') };
}

export function checkBrokerOptions(options: BrokerOptions | undefined): { token: string | undefined; tls: TlsOption } {
  const { token, tls = 'off' } = options ?? {};
  if (token !== undefined) {
    // eslint-disable-next-line no-control-regex
    if (typeof token !== 'string' || token === '' || /[\x00-\x20\x7f]/.test(token) || !token.isWellFormed()) {
      invalid('token must be a non-empty string without spaces or control characters');
    }
    if (Buffer.byteLength(`H 1 ${token}`) > MAX_LINE_BYTES) invalid('token is too long for one protocol line');
  }
  const modeOk = tls === 'off' || tls === 'system' || tls === 'insecure';
  if (!modeOk && (typeof tls !== 'object' || tls === null || typeof tls.ca !== 'string' || tls.ca === '')) {
    invalid(`tls must be 'off', 'system', 'insecure' or { ca: path-or-PEM }, got ${JSON.stringify(tls)}`);
  }
  return { token, tls };
}

/** Parses `host:port` (IPv6 in brackets). The address was checked before. */
export function splitAddress(address: string): { host: string; port: number } {
  const colon = address.lastIndexOf(':');
  const host = address.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
  return { host, port: Number(address.slice(colon + 1)) };
}

export function checkTimeoutMs(name: string, ms: unknown): number {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) invalid(`${name} must be a finite number of milliseconds >= 0, got ${String(ms)}`);
  return ms;
}
