/**
 * The peer protocol between cluster nodes: text lines, one message each.
 * Pure: encode and decode only. Each node writes only on its outbound link
 * to a peer and reads only from the peer's inbound link to it.
 *
 *   HELLO 1 <name> <peer-token|->        first line of every link
 *   WELCOME <name> | DENIED <reason>     answer to HELLO (DENIED then close)
 *   HB <role> <epoch> <next-token> <following|-> <applied-seq>
 *   FOLLOW                               standby -> active: send me your stream
 *   SNAP <next-token> <count>            active -> standby: a snapshot follows
 *   S <key> <token> <lease-ms> <remaining-ms>   one held lock of the snapshot
 *   SNAPEND                              end of snapshot; commands follow (seq 0)
 *   G <key> <lease-ms> <token> | R <key> <token> | X <key> <token> | F <token>
 *                                        grant, release, expire, token floor
 *   ACK <seq>                            standby -> active: applied through seq
 *   HANDOFF <seq>                        active -> successor: take over after seq
 *   TAKEN <epoch>                        successor -> old active: serving now
 */
import type { Command, Token } from '../state-machine/commands.js';

export type PeerRole = 'starting' | 'standby' | 'active' | 'stopping';

export type PeerMessage =
  | { type: 'hello'; name: string; peerToken: string | undefined }
  | { type: 'welcome'; name: string }
  | { type: 'denied'; reason: string }
  | { type: 'heartbeat'; role: PeerRole; epoch: bigint; nextToken: Token; following: string | undefined; appliedSeq: number }
  | { type: 'follow' }
  | { type: 'snapshot'; nextToken: Token; count: number }
  | { type: 'snapshot-lock'; key: string; token: Token; leaseMs: number; remainingMs: number }
  | { type: 'snapshot-end' }
  | { type: 'command'; command: Command; token: Token | undefined }
  | { type: 'ack'; seq: number }
  | { type: 'handoff'; seq: number }
  | { type: 'taken'; epoch: bigint };

const ROLES: readonly PeerRole[] = ['starting', 'standby', 'active', 'stopping'];

export class PeerProtocolError extends Error {}

function int(text: string | undefined): number {
  if (text === undefined || !/^\d{1,15}$/.test(text)) throw new PeerProtocolError(`bad number ${JSON.stringify(text)}`);
  return Number(text);
}

function big(text: string | undefined): bigint {
  if (text === undefined || !/^\d{1,20}$/.test(text)) throw new PeerProtocolError(`bad token ${JSON.stringify(text)}`);
  return BigInt(text);
}

function word(text: string | undefined): string {
  if (text === undefined || text === '') throw new PeerProtocolError('missing field');
  return text;
}

/** Decodes one line (without `\n`). Throws PeerProtocolError on anything malformed. */
export function decodePeerMessage(line: string): PeerMessage {
  const f = line.split(' ');
  switch (f[0]) {
    case 'G':
      return { type: 'command', command: { type: 'grant', key: word(f[1]), leaseMs: int(f[2]) }, token: big(f[3]) };
    case 'R':
      return { type: 'command', command: { type: 'release', key: word(f[1]), token: big(f[2]) }, token: undefined };
    case 'X':
      return { type: 'command', command: { type: 'expire', key: word(f[1]), token: big(f[2]) }, token: undefined };
    case 'F':
      return { type: 'command', command: { type: 'token-floor', atLeast: big(f[1]) }, token: undefined };
    case 'S':
      return { type: 'snapshot-lock', key: word(f[1]), token: big(f[2]), leaseMs: int(f[3]), remainingMs: int(f[4]) };
    case 'ACK':
      return { type: 'ack', seq: int(f[1]) };
    case 'HB': {
      const role = f[1] as PeerRole;
      if (!ROLES.includes(role)) throw new PeerProtocolError(`bad role ${f[1]}`);
      return { type: 'heartbeat', role, epoch: big(f[2]), nextToken: big(f[3]), following: f[4] === '-' ? undefined : word(f[4]), appliedSeq: int(f[5]) };
    }
    case 'HELLO':
      if (f[1] !== '1') throw new PeerProtocolError(`unsupported peer protocol version ${f[1]}`);
      return { type: 'hello', name: word(f[2]), peerToken: f[3] === '-' ? undefined : word(f[3]) };
    case 'WELCOME':
      return { type: 'welcome', name: word(f[1]) };
    case 'DENIED':
      return { type: 'denied', reason: f.slice(1).join(' ') };
    case 'FOLLOW':
      return { type: 'follow' };
    case 'SNAP':
      return { type: 'snapshot', nextToken: big(f[1]), count: int(f[2]) };
    case 'SNAPEND':
      return { type: 'snapshot-end' };
    case 'HANDOFF':
      return { type: 'handoff', seq: int(f[1]) };
    case 'TAKEN':
      return { type: 'taken', epoch: big(f[1]) };
    default:
      throw new PeerProtocolError(`unknown peer message ${JSON.stringify(line.slice(0, 20))}`);
  }
}

function digits(buf: Buffer, s: number, e: number): number {
  if (e <= s || e - s > 15) throw new PeerProtocolError('bad number');
  let n = 0;
  for (let i = s; i < e; i++) {
    const d = buf[i]! - 0x30;
    if (d < 0 || d > 9) throw new PeerProtocolError('bad number');
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
      if (d < 0 || d > 9) throw new PeerProtocolError('bad token');
      n = n * 10 + d;
    }
    if (e > s && n <= Number.MAX_SAFE_INTEGER) return BigInt(n);
  }
  return big(buf.toString('latin1', s, e));
}

/**
 * Decodes one line straight from the bytes. The replicated commands (G, R,
 * X: nearly every line of a busy stream) are parsed without building the
 * line as a string first; anything else goes through decodePeerMessage.
 */
export function decodePeerLine(buf: Buffer, s: number, e: number): PeerMessage {
  const op = buf[s];
  if ((op === 0x47 || op === 0x52 || op === 0x58) && buf[s + 1] === 0x20) {
    const keyEnd = buf.indexOf(0x20, s + 2);
    if (keyEnd > s + 2 && keyEnd < e) {
      const key = buf.toString('utf8', s + 2, keyEnd);
      if (op === 0x47) {
        const leaseEnd = buf.indexOf(0x20, keyEnd + 1);
        if (leaseEnd < 0 || leaseEnd >= e) throw new PeerProtocolError('bad grant');
        return { type: 'command', command: { type: 'grant', key, leaseMs: digits(buf, keyEnd + 1, leaseEnd) }, token: tokenAt(buf, leaseEnd + 1, e) };
      }
      const token = tokenAt(buf, keyEnd + 1, e);
      return { type: 'command', command: op === 0x52 ? { type: 'release', key, token } : { type: 'expire', key, token }, token: undefined };
    }
  }
  return decodePeerMessage(buf.toString('utf8', s, e));
}

/** Encodes a replicated command (with the token a grant received, so replicas can check they agree). */
export function encodeCommand(command: Command, grantedToken?: Token): string {
  switch (command.type) {
    case 'grant':
      return `G ${command.key} ${command.leaseMs} ${grantedToken}\n`;
    case 'release':
      return `R ${command.key} ${command.token}\n`;
    case 'expire':
      return `X ${command.key} ${command.token}\n`;
    case 'token-floor':
      return `F ${command.atLeast}\n`;
    case 'noop':
      return '';
  }
}

export function encodePeerMessage(m: Exclude<PeerMessage, { type: 'command' }>): string {
  switch (m.type) {
    case 'hello':
      return `HELLO 1 ${m.name} ${m.peerToken ?? '-'}\n`;
    case 'welcome':
      return `WELCOME ${m.name}\n`;
    case 'denied':
      return `DENIED ${m.reason}\n`;
    case 'heartbeat':
      return `HB ${m.role} ${m.epoch} ${m.nextToken} ${m.following ?? '-'} ${m.appliedSeq}\n`;
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
      return `TAKEN ${m.epoch}\n`;
  }
}
