/**
 * The first lines of every peer link, inside its TLS session (see
 * peer-tls.ts), whatever the mode speaks after them:
 *
 *   HELLO <version> <name> <cluster> <proof|->   dialer -> listener
 *                                        version: the peer protocol the dialer offers
 *                                        cluster: see cluster-identity.ts
 *   WELCOME <name> <proof|->             listener -> dialer, version 2: linked
 *   WELCOME <version> <name> <proof|->   listener -> dialer, version 3 on: linked at `version`
 *   DENIED <code> <text>                 listener -> dialer, then close
 *
 * `proof` is `-` unless the link runs on certificates and the nodes also
 * have a peer token: then each side proves the token, bound to this TLS
 * session (peer-keys.ts). With a peer token alone, TLS itself proved it.
 *
 * **Versions.** A node speaks a set of peer protocol versions (this release:
 * 3 and 2; PEER_PROTOCOLS). Its dialer offers the newest first; a listener
 * that does not speak it answers `DENIED version` (release 0.1.0, which
 * speaks 2 only, does exactly that to anything but a five-field `HELLO 2`),
 * and the dialer dials again at once with the next older version it speaks
 * (peer-mesh.ts). Only once every version was refused is that a refusal. A
 * listener accepts every version it speaks and answers each in the form
 * that version's dialer expects: a version-2 dialer reads `WELCOME <name>
 * <proof>`, so version 2 gets exactly that; from version 3 on the WELCOME
 * names the version, and the dialer checks it is the one it offered. The
 * version fixes what the link carries after the handshake, in that one
 * direction (each node writes only on the links it dialled).
 *
 * DENIED codes say why, so that the dialer can tell a peer that is alive but
 * refuses it from one that is gone: `cluster` (another peers list or mode),
 * `name` (not a member, or another node answers), `version` (another peer
 * protocol), `token` (the in-session proof failed), `certificate` (it does
 * not name the node).
 */
import { PeerProtocolError } from '../errors.js';

/** The peer protocol versions this code knows. */
export type PeerProtocol = 2 | 3;
/** What this release speaks, newest first (a node's wiring may narrow it: see PeerMesh). */
export const PEER_PROTOCOLS: readonly PeerProtocol[] = [3, 2];
/** The newest version this release speaks. */
export const PEER_PROTOCOL_NEWEST: PeerProtocol = 3;

export const DENIAL_CODES = ['cluster', 'name', 'version', 'token', 'certificate'] as const;
export type DenialCode = (typeof DENIAL_CODES)[number];

export type Handshake =
  | { type: 'hello'; version: PeerProtocol; name: string; cluster: string; proof: string | undefined }
  | { type: 'welcome'; version: PeerProtocol; name: string; proof: string | undefined }
  | { type: 'denied'; code: DenialCode | undefined; reason: string };

function word(text: string | undefined): string {
  if (text === undefined || text === '') throw new PeerProtocolError('missing field');
  return text;
}

function proofField(text: string | undefined): string | undefined {
  const p = word(text);
  return p === '-' ? undefined : p;
}

/** `versions` in order, newest first, checked (a node must speak at least one version this code knows). */
export function peerProtocols(versions: readonly number[]): readonly PeerProtocol[] {
  const known = [...new Set(versions)].sort((a, b) => b - a);
  if (known.length === 0) throw new RangeError('a node speaks at least one peer protocol version');
  for (const v of known) if (!PEER_PROTOCOLS.includes(v as PeerProtocol)) throw new RangeError(`peer protocol version ${v} is not one this release knows (${PEER_PROTOCOLS.join(', ')})`);
  return known as PeerProtocol[];
}

/** A version field: one of `speaks`, else the PeerProtocolError a listener answers `DENIED version` with. */
function versionField(text: string | undefined, speaks: readonly PeerProtocol[]): PeerProtocol {
  const v = /^[1-9][0-9]{0,3}$/.test(text ?? '') ? Number(text) : undefined;
  const known = speaks.find((s) => s === v);
  if (known === undefined) throw new PeerProtocolError(`unsupported peer protocol version ${(text ?? '').slice(0, 8)} (this node speaks ${speaks.join(', ')})`);
  return known;
}

export function encodeHandshake(m: Handshake): string {
  switch (m.type) {
    case 'hello':
      return `HELLO ${m.version} ${m.name} ${m.cluster} ${m.proof ?? '-'}\n`;
    case 'welcome':
      // Version 2's dialer (release 0.1.0) takes exactly `WELCOME <name> <proof>`.
      return m.version === 2 ? `WELCOME ${m.name} ${m.proof ?? '-'}\n` : `WELCOME ${m.version} ${m.name} ${m.proof ?? '-'}\n`;
    case 'denied':
      return `DENIED ${m.code ?? 'version'} ${m.reason}\n`;
  }
}

/**
 * Decodes one handshake line (without `\n`) of a node that speaks
 * `speaks`. Throws PeerProtocolError on anything else, a HELLO or WELCOME of
 * a version it does not speak included.
 */
export function decodeHandshake(line: string, speaks: readonly PeerProtocol[] = PEER_PROTOCOLS): Handshake {
  const f = line.split(' ');
  switch (f[0]) {
    case 'HELLO': {
      const version = versionField(f[1], speaks);
      if (f.length !== 5) throw new PeerProtocolError('HELLO takes a version, a name, a cluster identity and a proof');
      return { type: 'hello', version, name: word(f[2]), cluster: word(f[3]), proof: proofField(f[4]) };
    }
    case 'WELCOME':
      if (f.length === 3 && speaks.includes(2)) return { type: 'welcome', version: 2, name: word(f[1]), proof: proofField(f[2]) };
      if (f.length !== 4) throw new PeerProtocolError('WELCOME takes a version, a name and a proof (version 2: a name and a proof)');
      {
        const version = versionField(f[1], speaks);
        if (version === 2) throw new PeerProtocolError('a version-2 WELCOME names no version');
        return { type: 'welcome', version, name: word(f[2]), proof: proofField(f[3]) };
      }
    case 'DENIED': {
      const code = DENIAL_CODES.find((c) => c === f[1]);
      return { type: 'denied', code, reason: f.slice(code === undefined ? 1 : 2).join(' ') };
    }
    default:
      throw new PeerProtocolError(`HELLO, WELCOME or DENIED expected, got ${JSON.stringify(line.slice(0, 20))}`);
  }
}
