/**
 * The one text form of lock-table commands, for both replication modes:
 *
 *   G <key> <lease-ms> [<token>] [~<owner>] | R <key> <token> | X <key> <token> (expire)
 *   | L <key> <token> <lease-ms> (extend) | F <token> | '' (no-op)
 *
 * `X` is Expire, as it has been since the first data directories were
 * written (their Raft logs hold such entries); Extend, which came later,
 * got a letter of its own so that no stored entry changes meaning.
 * `~<owner>`: the named client identity that acquired (only it may release).
 *
 * Raft log entries are exactly seed 001's commands: a grant carries no token
 * (every node's state machine assigns it when it applies the entry). The
 * priority cluster's stream adds the token the active node's grant received,
 * so a standby can check that it agrees. Lines and newlines are the
 * transports' business, not this codec's.
 */
import type { Command, Token } from './commands.js';

import { CommandFormatError } from '../errors.js';

/** A decoded command, with the token a replicated grant received (undefined otherwise). */
export interface DecodedCommand {
  /** Tagged so a transport can pass it on as one of its messages as it is (one object per line). */
  readonly type: 'command';
  readonly command: Command;
  readonly token: Token | undefined;
}

export function encodeCommand(c: Command, grantedToken?: Token): string {
  switch (c.type) {
    case 'grant': {
      const text = grantedToken === undefined ? `G ${c.key} ${c.leaseMs}` : `G ${c.key} ${c.leaseMs} ${grantedToken}`;
      return c.owner === undefined ? text : `${text} ~${c.owner}`;
    }
    case 'release':
      return `R ${c.key} ${c.token}`;
    case 'expire':
      return `X ${c.key} ${c.token}`;
    case 'extend':
      return `L ${c.key} ${c.token} ${c.leaseMs}`;
    case 'token-floor':
      return `F ${c.atLeast}`;
    case 'noop':
      return '';
  }
}

/** A decimal count or duration field (at most 15 digits). Also used by the peer protocol's other lines. */
export function int(text: string | undefined): number {
  if (text === undefined || !/^\d{1,15}$/.test(text)) throw new CommandFormatError(`bad number ${JSON.stringify(text)}`);
  return Number(text);
}

/** A decimal token field (u64). */
export function big(text: string | undefined): Token {
  if (text === undefined || !/^\d{1,20}$/.test(text)) throw new CommandFormatError(`bad token ${JSON.stringify(text)}`);
  return BigInt(text);
}

/** A non-empty word field (a key, a name). */
export function word(text: string | undefined): string {
  if (text === undefined || text === '') throw new CommandFormatError('missing field');
  return text;
}

/** True when `op` (a line's first field) is a command's. */
export function isCommandOp(op: string | undefined): boolean {
  return op === 'G' || op === 'R' || op === 'X' || op === 'L' || op === 'F';
}

/** Decodes a command from its text. Throws CommandFormatError on anything malformed. */
export function decodeCommandWithToken(text: string): DecodedCommand {
  if (text === '') return { type: 'command', command: { type: 'noop' }, token: undefined };
  const f = text.split(' ');
  switch (f[0]) {
    case 'G': {
      // The owner, when there is one, is the last field.
      const owner = f.length > 3 && f[f.length - 1]!.startsWith('~') ? f.pop()!.slice(1) : undefined;
      const grant = { type: 'grant' as const, key: word(f[1]), leaseMs: int(f[2]), ...(owner === undefined ? {} : { owner: word(owner) }) };
      return { type: 'command', command: grant, token: f[3] === undefined ? undefined : big(f[3]) };
    }
    case 'R':
      return { type: 'command', command: { type: 'release', key: word(f[1]), token: big(f[2]) }, token: undefined };
    case 'X':
      return { type: 'command', command: { type: 'expire', key: word(f[1]), token: big(f[2]) }, token: undefined };
    case 'L':
      return { type: 'command', command: { type: 'extend', key: word(f[1]), token: big(f[2]), leaseMs: int(f[3]) }, token: undefined };
    case 'F':
      return { type: 'command', command: { type: 'token-floor', atLeast: big(f[1]) }, token: undefined };
    default:
      throw new CommandFormatError(`not a lock command: ${JSON.stringify(text.slice(0, 40))}`);
  }
}

/** Decodes a command from its text (a Raft entry). */
export function decodeCommand(text: string): Command {
  return decodeCommandWithToken(text).command;
}

function digits(buf: Buffer, s: number, e: number): number {
  if (e <= s || e - s > 15) throw new CommandFormatError('bad number');
  let n = 0;
  for (let i = s; i < e; i++) {
    const d = buf[i]! - 0x30;
    if (d < 0 || d > 9) throw new CommandFormatError('bad number');
    n = n * 10 + d;
  }
  return n;
}

function tokenAt(buf: Buffer, s: number, e: number): Token {
  if (e - s <= 16) {
    // Most tokens (Unix microseconds and up) fit a double exactly: no string to build.
    let n = 0;
    for (let i = s; i < e; i++) {
      const d = buf[i]! - 0x30;
      if (d < 0 || d > 9) throw new CommandFormatError('bad token');
      n = n * 10 + d;
    }
    if (e > s && n <= Number.MAX_SAFE_INTEGER) return BigInt(n);
  }
  return big(buf.toString('latin1', s, e));
}

/**
 * Decodes a grant with its token, a release or an expire (nearly every line
 * of a busy replication stream) straight from the bytes, without building
 * the line as a string first. Undefined when the line is something else:
 * decode it as text then.
 */
export function decodeCommandBytes(buf: Buffer, s: number, e: number): DecodedCommand | undefined {
  const op = buf[s];
  if ((op !== 0x47 && op !== 0x52 && op !== 0x58) || buf[s + 1] !== 0x20) return undefined;
  const keyEnd = buf.indexOf(0x20, s + 2);
  if (keyEnd <= s + 2 || keyEnd >= e) return undefined;
  const key = buf.toString('utf8', s + 2, keyEnd);
  if (op === 0x47) {
    const leaseEnd = buf.indexOf(0x20, keyEnd + 1);
    if (leaseEnd < 0 || leaseEnd >= e) throw new CommandFormatError('bad grant');
    // `G key lease token ~owner`: a named identity's grant.
    const ownerAt = buf.indexOf(0x20, leaseEnd + 1);
    if (ownerAt >= 0 && ownerAt < e) {
      if (buf[ownerAt + 1] !== 0x7e || ownerAt + 2 >= e) throw new CommandFormatError('bad grant');
      const owner = buf.toString('utf8', ownerAt + 2, e);
      return { type: 'command', command: { type: 'grant', key, leaseMs: digits(buf, keyEnd + 1, leaseEnd), owner }, token: tokenAt(buf, leaseEnd + 1, ownerAt) };
    }
    return { type: 'command', command: { type: 'grant', key, leaseMs: digits(buf, keyEnd + 1, leaseEnd) }, token: tokenAt(buf, leaseEnd + 1, e) };
  }
  const token = tokenAt(buf, keyEnd + 1, e);
  return { type: 'command', command: op === 0x52 ? { type: 'release', key, token } : { type: 'expire', key, token }, token: undefined };
}
