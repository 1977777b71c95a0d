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
 *   G <key> <lease-ms> <token> | R <key> <token> | X <key> <token> | F <token>
 *                                        grant, release, expire, token floor
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

export type PeerRole = 'starting' | 'standby' | 'active' | 'stopping';

export type PeerMessage =
  | { type: 'heartbeat'; role: PeerRole; nextToken: Token; following: string | undefined; appliedSeq: number; heard: readonly string[] }
  | { type: 'follow' }
  | { type: 'snapshot'; nextToken: Token; count: number }
  | { type: 'snapshot-lock'; key: string; token: Token; leaseMs: number; remainingMs: number }
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

function replicated(d: DecodedCommand): DecodedCommand {
  if (d.command.type === 'grant' && d.token === undefined) throw new PeerProtocolError('replicated grant without its token');
  return d;
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
  if (isCommandOp(f[0])) return replicated(decodeCommandWithToken(line));
  switch (f[0]) {
    case 'S':
      return { type: 'snapshot-lock', key: word(f[1]), token: big(f[2]), leaseMs: int(f[3]), remainingMs: int(f[4]) };
    case 'ACK':
      return { type: 'ack', seq: int(f[1]) };
    case 'HB': {
      const role = f[1] as PeerRole;
      if (!ROLES.includes(role)) throw new PeerProtocolError(`bad role ${f[1]}`);
      return { type: 'heartbeat', role, nextToken: big(f[2]), following: f[3] === '-' ? undefined : word(f[3]), appliedSeq: int(f[4]), heard: word(f[5]) === '-' ? [] : f[5]!.split(',') };
    }
    case 'FOLLOW':
      return { type: 'follow' };
    case 'SNAP':
      return { type: 'snapshot', nextToken: big(f[1]), count: int(f[2]) };
    case 'SNAPEND':
      return { type: 'snapshot-end' };
    case 'HANDOFF':
      return { type: 'handoff', seq: int(f[1]) };
    case 'TAKEN':
      return { type: 'taken', nextToken: big(f[1]) };
    default:
      throw new PeerProtocolError(`unknown peer message ${JSON.stringify(line.slice(0, 20))}`);
  }
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
  return d ?? decodePeerMessage(buf.toString('utf8', s, e));
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
      return `S ${m.key} ${m.token} ${m.leaseMs} ${m.remainingMs}\n`;
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
