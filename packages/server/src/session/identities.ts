/**
 * Client identities: who a connection is, from the token in its `H`. A bare
 * token may use every key (as before identities existed); a named identity
 * may use only keys under its prefixes (`keys: ['']` for every key: an
 * identity without `keys` is refused at start, config/load.ts), and may
 * release (or extend) only inside them. A grant is released only by the
 * identity that acquired it, and a bare-token grant only by a bare-token
 * connection (its owner's name travels with each grant, in replicated
 * state, so a failover keeps it). Tokens are checked in constant time
 * (secret-set.ts); per-identity counts feed /metrics.
 */
import type { ClientTokenEntry } from '../config/load.js';
import { SecretSet } from '../secret-set.js';

export interface ClientIdentity {
  /** Undefined for a bare token. */
  readonly name: string | undefined;
  /** Key prefixes it may use; undefined: every key. */
  readonly keys: readonly string[] | undefined;
}

/** What /metrics shows per identity ('-': bare tokens, and connections when no token is required). */
export interface IdentityCounts {
  connections: number;
  acquires: number;
  releases: number;
  /** Requests refused with `E perm` (a key outside its prefixes). */
  denied: number;
  /** Releases answered `N`. */
  notReleased: number;
}

export const UNNAMED = '-';

export class ClientIdentities {
  private readonly secrets = new SecretSet([]);
  private entries: ClientIdentity[] = [];
  readonly counts = new Map<string, IdentityCounts>();

  constructor(entries: readonly ClientTokenEntry[]) {
    this.replace(entries);
  }

  /** New tokens (SIGHUP): connections already open keep the identity they have. */
  replace(entries: readonly ClientTokenEntry[]): void {
    this.secrets.replace(entries.map((e) => e.token));
    this.entries = entries.map((e) => ({ name: e.name, keys: e.keys }));
  }

  get count(): number {
    return this.entries.length;
  }

  /** The identity `token` belongs to, or undefined when it is none of them. */
  identify(token: string): ClientIdentity | undefined {
    const i = this.secrets.indexOf(token);
    return i < 0 ? undefined : this.entries[i];
  }

  /** The counters of `identity` (created on first use). */
  countsOf(identity: ClientIdentity | undefined): IdentityCounts {
    const label = identity?.name ?? UNNAMED;
    let c = this.counts.get(label);
    if (c === undefined) {
      c = { connections: 0, acquires: 0, releases: 0, denied: 0, notReleased: 0 };
      this.counts.set(label, c);
    }
    return c;
  }
}

/** True when `identity` may use `key`. */
export function keyAllowed(identity: ClientIdentity | undefined, key: string): boolean {
  const prefixes = identity?.keys;
  if (prefixes === undefined) return true;
  for (const p of prefixes) if (key.startsWith(p)) return true;
  return false;
}
