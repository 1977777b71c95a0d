/**
 * The keys peer links use, derived from the peer tokens (never the tokens
 * themselves, which never leave the node):
 *
 * - TLS 1.3 external pre-shared key: key = HKDF-SHA256(token, salt, "tls13
 *   psk"), offered under the identity "ticketing-peer-1.<key id>", where the
 *   key id (HKDF, "key id", 8 bytes) lets the listener pick the right key
 *   when it accepts two tokens (rotation) without trying both.
 * - With certificates and a peer token, a proof inside the TLS session:
 *   HMAC-SHA256(HKDF(token, "link proof"), role, the session's exported
 *   keying material). It is bound to that one TLS session, so it can be
 *   neither replayed nor relayed onto another link.
 *
 * A node accepts `peer-token` and, while a rotation is under way,
 * `peer-token-next`; it dials with `peer-token`, and with the next one when a
 * peer refused that (see PeerMesh).
 */
import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import type { PskLookup, PskOffer } from '../seams/transport.js';

const SALT = 'ticketing peer link v1';
const IDENTITY_PREFIX = 'ticketing-peer-1.';
/** Label of the keying material a link proof is bound to (RFC 5705 exporter). */
export const EXPORTER_LABEL = 'EXPORTER-ticketing-peer-link-1';
export const EXPORTER_BYTES = 32;
export const EXPORTER_CONTEXT = Buffer.from('peer link proof');

function derive(token: string, info: string, length: number): Buffer {
  return Buffer.from(hkdfSync('sha256', Buffer.from(token, 'utf8'), SALT, info, length));
}

interface DerivedKey {
  readonly identity: string;
  readonly psk: Buffer;
  readonly proofKey: Buffer;
}

function deriveAll(token: string): DerivedKey {
  return {
    identity: IDENTITY_PREFIX + derive(token, 'key id', 8).toString('hex'),
    psk: derive(token, 'tls13 psk', 32),
    proofKey: derive(token, 'link proof', 32),
  };
}

export type ProofRole = 'dialer' | 'listener';

export class PeerKeys {
  /** [current, next?] */
  private readonly keys: readonly DerivedKey[];

  constructor(current: string, next?: string) {
    this.keys = next === undefined || next === current ? [deriveAll(current)] : [deriveAll(current), deriveAll(next)];
  }

  /** How many tokens this node accepts (2 during a rotation). */
  get count(): number {
    return this.keys.length;
  }

  /** What a dial offers: attempt 0 uses peer-token, 1 peer-token-next (when set). */
  offer(which: number): PskOffer {
    const k = this.keys[which % this.keys.length]!;
    return { identity: k.identity, key: k.psk };
  }

  /** The listener's side: the key for an identity a dialer offered. */
  readonly lookup: PskLookup = (identity) => this.keys.find((k) => k.identity === identity)?.psk;

  /** A proof, bound to one TLS session's exported keying material, that `role` holds token `which`. */
  proof(role: ProofRole, exported: Buffer, which = 0): string {
    const k = this.keys[which % this.keys.length]!;
    return createHmac('sha256', k.proofKey).update(`${role} `).update(exported).digest('hex');
  }

  /** True when `proof` proves any accepted token for `role` on this session. */
  checkProof(role: ProofRole, exported: Buffer, proof: string): boolean {
    if (!/^[0-9a-f]{64}$/.test(proof)) return false;
    const given = Buffer.from(proof, 'hex');
    let ok = false;
    for (let i = 0; i < this.keys.length; i++) {
      if (timingSafeEqual(given, Buffer.from(this.proof(role, exported, i), 'hex'))) ok = true;
    }
    return ok;
  }
}
