/**
 * The first lines of every peer link, inside its TLS session (see
 * peer-tls.ts), whatever the mode speaks after them:
 *
 *   HELLO 2 <name> <cluster> <proof|->   dialer -> listener
 *                                        cluster: see cluster-identity.ts
 *   WELCOME <name> <proof|->             listener -> dialer: linked
 *   DENIED <code> <text>                 listener -> dialer, then close
 *
 * `proof` is `-` unless the link runs on certificates and the nodes also
 * have a peer token: then each side proves the token, bound to this TLS
 * session (peer-keys.ts). With a peer token alone, TLS itself proved it.
 *
 * DENIED codes say why, so that the dialer can tell a peer that is alive but
 * refuses it from one that is gone: `cluster` (another peers list or mode),
 * `name` (not a member, or another node answers), `version` (another peer
 * protocol), `token` (the in-session proof failed), `certificate` (it does
 * not name the node).
 */
import { PeerProtocolError } from '../errors.js';

export const PEER_PROTOCOL_VERSION = '2';

export const DENIAL_CODES = ['cluster', 'name', 'version', 'token', 'certificate'] as const;
export type DenialCode = (typeof DENIAL_CODES)[number];

export type Handshake =
  | { type: 'hello'; name: string; cluster: string; proof: string | undefined }
  | { type: 'welcome'; name: string; proof: string | undefined }
  | { type: 'denied'; code: DenialCode | undefined; reason: string };

function word(text: string | undefined): string {
  if (text === undefined || text === '') throw new PeerProtocolError('missing field');
  return text;
}

function proofField(text: string | undefined): string | undefined {
  const p = word(text);
  return p === '-' ? undefined : p;
}

export function encodeHandshake(m: Handshake): string {
  switch (m.type) {
    case 'hello':
      return `HELLO ${PEER_PROTOCOL_VERSION} ${m.name} ${m.cluster} ${m.proof ?? '-'}\n`;
    case 'welcome':
      return `WELCOME ${m.name} ${m.proof ?? '-'}\n`;
    case 'denied':
      return `DENIED ${m.code ?? 'version'} ${m.reason}\n`;
  }
}

/** Decodes one handshake line (without `\n`). Throws PeerProtocolError on anything else. */
export function decodeHandshake(line: string): Handshake {
  const f = line.split(' ');
  switch (f[0]) {
    case 'HELLO':
      if (f[1] !== PEER_PROTOCOL_VERSION) throw new PeerProtocolError(`unsupported peer protocol version ${(f[1] ?? '').slice(0, 8)} (this node speaks ${PEER_PROTOCOL_VERSION})`);
      if (f.length !== 5) throw new PeerProtocolError('HELLO takes a version, a name, a cluster identity and a proof');
      return { type: 'hello', name: word(f[2]), cluster: word(f[3]), proof: proofField(f[4]) };
    case 'WELCOME':
      if (f.length !== 3) throw new PeerProtocolError('WELCOME takes a name and a proof');
      return { type: 'welcome', name: word(f[1]), proof: proofField(f[2]) };
    case 'DENIED': {
      const code = DENIAL_CODES.find((c) => c === f[1]);
      return { type: 'denied', code, reason: f.slice(code === undefined ? 1 : 2).join(' ') };
    }
    default:
      throw new PeerProtocolError(`HELLO, WELCOME or DENIED expected, got ${JSON.stringify(line.slice(0, 20))}`);
  }
}
