/**
 * The peer protocol between cluster nodes: text lines, one message each.
 * Pure: encode and decode only. Each node writes only on its outbound link
 * to a peer and reads only from the peer's inbound link to it.
 *
 *   (after the link's handshake, see peers/handshake.ts)
 *   HB <role> <next-token> <following|-> <applied-seq> <heard|->
 *                                        heard: the peers this node heard within the
 *                                        failover timeout, comma-separated
 *   FOLLOW                               standby -> active: send me your stream
 *   SNAP <next-token> <count>            active -> standby: a snapshot follows
 *   S <key> <token> <lease-ms> <remaining-ms>   one held lock of the snapshot
 *   SNAPEND                              end of snapshot; commands follow (seq 0)
 *   G <key> <lease-ms> <token> | R <key> <token> | X <key> <token> | L <key> <token> <lease-ms> | F <token>
 *                                        grant, release, expire, extend, token floor
 *   ACK <seq>                            standby -> active: applied through seq
 *   HANDOFF <seq>                        active -> successor: take over after seq
 *   TAKEN <next-token>                   successor -> old active: serving now
 */
import { CommandFormatError, PeerProtocolError } from '../errors.js';
import {
  big,
  decodeCommandBytes,
  decodeCommandWithToken,
  encodeCommand,
  int,
  isCommandOp,
  word,
  type DecodedCommand,
} from '../state-machine/command-codec.js';
import type { Command, Token } from '../state-machine/commands.js';
import { checkCommand, checkCommandFields, checkToken, IDENTITY_NAME, MAX_LEASE_MS } from '../state-machine/command-check.js';
import { keyError, MAX_TOKEN } from '@ticketing/protocol';

export type PeerRole = 'starting' | 'standby' | 'active' | 'stopping';

export type PeerMessage =
  | { type: 'heartbeat'; role: PeerRole; nextToken: Token; following: string | undefined; appliedSeq: number; heard: readonly string[] }
  | { type: 'follow' }
  | { type: 'snapshot'; nextToken: Token; count: number }
  | { type: 'snapshot-lock'; key: string; token: Token; leaseMs: number; remainingMs: number; owner?: string }
  | { type: 'snapshot-end' }
  | DecodedCommand
  | { type: 'ack'; seq: number }
  | { type: 'handoff'; seq: number }
  | { type: 'taken'; nextToken: Token };

const ROLES: readonly PeerRole[] = ['starting', 'standby', 'active', 'stopping'];

/** The shared codec's field and command errors, as PeerProtocolErrors (the link is closed). */
function malformed(err: unknown): never {
  if (err instanceof CommandFormatError) throw new PeerProtocolError(err.message, { cause: err });
  throw err;
}

/** A replicated command must carry values a client could have caused (see command-check.ts). */
function replicated(d: DecodedCommand): DecodedCommand {
  if (d.command.type === 'grant' && d.token === undefined) throw new PeerProtocolError('replicated grant without its token');
  checkCommand(d.command);
  checkToken(d.token);
  return d;
}

/** Exactly `n` fields, or the line is malformed (trailing fields are not ignored). */
function fields(f: string[], n: number): string[] {
  if (f.length !== n) throw new PeerProtocolError(`${f[0]} takes ${n - 1} fields, got ${f.length - 1}`);
  return f;
}

/** A token inside u64 (0 allowed: an empty stream's next token is never 0, but a floor may be). */
function tokenField(text: string | undefined): Token {
  const t = big(text);
  if (t > MAX_TOKEN) throw new PeerProtocolError(`token ${t} is above 2^64-1`);
  return t;
}

/** A key a client could have sent. */
function keyField(text: string | undefined): string {
  const k = word(text);
  if (keyError(k) !== undefined) throw new PeerProtocolError('bad key');
  return k;
}

/** Decodes one line (without `\n`). Throws PeerProtocolError on anything malformed. */
export function decodePeerMessage(line: string): PeerMessage {
  try {
    return decodeFields(line, line.split(' '));
  } catch (err) {
    return malformed(err);
  }
}

function decodeFields(line: string, f: string[]): PeerMessage {
  if (isCommandOp(f[0])) {
    checkCommandFields(line, true);
    return replicated(decodeCommandWithToken(line));
  }
  switch (f[0]) {
    case 'S': {
      const owner = f.length === 6 && f[5]!.startsWith('~') ? f.pop()!.slice(1) : undefined;
      if (owner !== undefined && !IDENTITY_NAME.test(owner)) throw new PeerProtocolError('bad owner');
      fields(f, 5);
      const leaseMs = int(f[3]);
      const remainingMs = int(f[4]);
      if (leaseMs < 1 || leaseMs > MAX_LEASE_MS || remainingMs > MAX_LEASE_MS + 1_000) throw new PeerProtocolError('snapshot lock lease out of range');
      const token = tokenField(f[2]);
      checkToken(token);
      return { type: 'snapshot-lock', key: keyField(f[1]), token, leaseMs, remainingMs, ...(owner === undefined ? {} : { owner }) };
    }
    case 'ACK':
      return { type: 'ack', seq: int(fields(f, 2)[1]) };
    case 'HB': {
      fields(f, 6);
      const role = f[1] as PeerRole;
      if (!ROLES.includes(role)) throw new PeerProtocolError(`bad role ${f[1]?.slice(0, 20)}`);
      const heard = f[5] === '-' ? [] : f[5]!.split(',').map(nodeName);
      return { type: 'heartbeat', role, nextToken: tokenField(f[2]), following: f[3] === '-' ? undefined : nodeName(f[3]), appliedSeq: int(f[4]), heard };
    }
    case 'FOLLOW':
      fields(f, 1);
      return { type: 'follow' };
    case 'SNAP':
      fields(f, 3);
      return { type: 'snapshot', nextToken: tokenField(f[1]), count: int(f[2]) };
    case 'SNAPEND':
      fields(f, 1);
      return { type: 'snapshot-end' };
    case 'HANDOFF':
      return { type: 'handoff', seq: int(fields(f, 2)[1]) };
    case 'TAKEN':
      return { type: 'taken', nextToken: tokenField(fields(f, 2)[1]) };
    default:
      throw new PeerProtocolError(`unknown peer message ${JSON.stringify(line.slice(0, 20))}`);
  }
}

/** A node name as the peers setting allows it. */
function nodeName(text: string | undefined): string {
  if (text === undefined || !/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/.test(text)) throw new PeerProtocolError('bad node name');
  return text;
}

/**
 * Decodes one line straight from the bytes. The replicated commands (G, R,
 * X: nearly every line of a busy stream) are parsed without building the
 * line as a string first; anything else goes through decodePeerMessage.
 */
export function decodePeerLine(buf: Buffer, s: number, e: number): PeerMessage {
  let d: DecodedCommand | undefined;
  try {
    d = decodeCommandBytes(buf, s, e);
  } catch (err) {
    malformed(err);
  }
  return d === undefined ? decodePeerMessage(buf.toString('utf8', s, e)) : checked(d);
}

function checked(d: DecodedCommand): DecodedCommand {
  try {
    return replicated(d);
  } catch (err) {
    return malformed(err);
  }
}

/** Encodes a replicated command as a line (with the token a grant received, so replicas can check they agree). */
export function encodeReplicated(c: Command, grantedToken: Token | undefined): string {
  return c.type === 'noop' ? '' : `${encodeCommand(c, grantedToken)}\n`;
}

export function encodePeerMessage(m: Exclude<PeerMessage, { type: 'command' }>): string {
  switch (m.type) {
    case 'heartbeat':
      return `HB ${m.role} ${m.nextToken} ${m.following ?? '-'} ${m.appliedSeq} ${m.heard.length === 0 ? '-' : m.heard.join(',')}\n`;
    case 'follow':
      return 'FOLLOW\n';
    case 'snapshot':
      return `SNAP ${m.nextToken} ${m.count}\n`;
    case 'snapshot-lock':
      return `S ${m.key} ${m.token} ${m.leaseMs} ${m.remainingMs}${m.owner === undefined ? '' : ` ~${m.owner}`}\n`;
    case 'snapshot-end':
      return 'SNAPEND\n';
    case 'ack':
      return `ACK ${m.seq}\n`;
    case 'handoff':
      return `HANDOFF ${m.seq}\n`;
    case 'taken':
      return `TAKEN ${m.nextToken}\n`;
  }
}
