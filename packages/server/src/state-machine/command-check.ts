/**
 * Range checks for a replicated command, beyond its syntax (command-codec.ts
 * parses; this says whether the values could have come from a real client):
 * a key a client could send, a lease a client could ask for, a token inside
 * u64. Replication streams and Raft entries pass here before anything is
 * applied or written to a WAL, so a peer's garbage never reaches the lock
 * table or the disk (where it would stop the node at every restart).
 */
import { keyError, MAX_LEASE_SECONDS, MAX_TOKEN } from '@ticketing/protocol';
import { CommandFormatError } from '../errors.js';
import type { Command, Token } from './commands.js';

/** A client identity's name (config `client-tokens` entries), as it travels in a grant. */
export const IDENTITY_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

/** The longest lease a client can ask for, in milliseconds. */
export const MAX_LEASE_MS = MAX_LEASE_SECONDS * 1000;

function token(t: Token, what: string): void {
  if (t < 1n || t > MAX_TOKEN) throw new CommandFormatError(`${what} ${t} is outside 1..2^64-1`);
}

function lease(ms: number): void {
  if (!Number.isSafeInteger(ms) || ms < 1 || ms > MAX_LEASE_MS) throw new CommandFormatError(`lease ${ms} ms is outside 1..${MAX_LEASE_MS}`);
}

/** Throws CommandFormatError when `c` holds a value no client request could have produced. */
export function checkCommand(c: Command): void {
  switch (c.type) {
    case 'grant':
      if (keyError(c.key) !== undefined) throw new CommandFormatError('bad key in a replicated grant');
      lease(c.leaseMs);
      if (c.owner !== undefined && !IDENTITY_NAME.test(c.owner)) throw new CommandFormatError('bad owner in a replicated grant');
      return;
    case 'release':
    case 'expire':
      if (keyError(c.key) !== undefined) throw new CommandFormatError(`bad key in a replicated ${c.type}`);
      return token(c.token, 'token');
    case 'extend':
      if (keyError(c.key) !== undefined) throw new CommandFormatError('bad key in a replicated extend');
      lease(c.leaseMs);
      return token(c.token, 'token');
    case 'token-floor':
      return token(c.atLeast, 'token floor');
    case 'noop':
      return;
  }
}

/** The same for a grant's token in a priority cluster's stream. */
export function checkToken(t: Token | undefined): void {
  if (t !== undefined) token(t, 'token');
}

/**
 * Throws CommandFormatError unless `text` has exactly its op's fields (the
 * codec reads the fields it needs and would ignore trailing ones). A grant
 * has its token only in a priority cluster's stream (`grantToken`).
 */
export function checkCommandFields(text: string, grantToken: boolean): void {
  if (text === '') return;
  const f = text.split(' ');
  const n = f.length;
  const op = text[0];
  const owned = op === 'G' && f[n - 1]!.startsWith('~') ? 1 : 0;
  const expected = (op === 'G' ? (grantToken ? 4 : 3) : op === 'F' ? 2 : op === 'L' ? 4 : 3) + owned;
  if (n !== expected) throw new CommandFormatError(`${op} takes ${expected - 1} fields, got ${n - 1}`);
}
