/**
 * The first lines of every peer link, whatever the mode speaks after them:
 *
 *   HELLO 1 <name> <nonce|-> <cluster>   dialer -> listener
 *                                        cluster: see cluster-identity.ts
 *   WELCOME <name> | DENIED <reason>     answer to HELLO (DENIED then close)
 *
 * With a peer token, CHALLENGE and PROOF come between HELLO and WELCOME (see
 * peer-auth.ts): the token itself is never sent.
 */

import { PeerProtocolError } from '../errors.js';
import { PeerAuth } from './peer-auth.js';

export type Handshake =
  | { type: 'hello'; name: string; nonce: string | undefined; cluster: string }
  | { type: 'welcome'; name: string }
  | { type: 'denied'; reason: string };

function word(text: string | undefined): string {
  if (text === undefined || text === '') throw new PeerProtocolError('missing field');
  return text;
}

export function encodeHandshake(m: Handshake): string {
  switch (m.type) {
    case 'hello':
      return `HELLO 1 ${m.name} ${m.nonce ?? '-'} ${m.cluster}\n`;
    case 'welcome':
      return `WELCOME ${m.name}\n`;
    case 'denied':
      return `DENIED ${m.reason}\n`;
  }
}

/** Decodes one handshake line (without `\n`). Throws PeerProtocolError on anything else. */
export function decodeHandshake(line: string): Handshake {
  const f = line.split(' ');
  switch (f[0]) {
    case 'HELLO':
      if (f[1] !== '1') throw new PeerProtocolError(`unsupported peer protocol version ${f[1]}`);
      if (f.length !== 5) throw new PeerProtocolError('HELLO takes a version, a name, a nonce and a cluster identity');
      return { type: 'hello', name: word(f[2]), nonce: f[3] === '-' ? undefined : PeerAuth.checkNonce(f[3]), cluster: word(f[4]) };
    case 'WELCOME':
      return { type: 'welcome', name: word(f[1]) };
    case 'DENIED':
      return { type: 'denied', reason: f.slice(1).join(' ') };
    default:
      throw new PeerProtocolError(`HELLO, WELCOME or DENIED expected, got ${JSON.stringify(line.slice(0, 20))}`);
  }
}
