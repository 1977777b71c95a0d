/**
 * Mutual challenge-response authentication of peer links with the shared
 * peer token. The token never crosses the wire, and each side proves it
 * knows the token only after the other side's nonce is fixed, so neither a
 * recorded exchange nor a reflected proof opens a link:
 *
 *   dialer   -> HELLO 1 <name> <dialer-nonce>
 *   listener -> CHALLENGE <listener-nonce> <listener-proof>
 *   dialer   -> PROOF <dialer-proof>          (only if the listener's proof checked out)
 *   listener -> WELCOME <name>                (only if the dialer's proof checked out)
 *
 * A proof is HMAC-SHA256(peer token, role, both names, both nonces); the two
 * roles use different labels so one side's proof is never valid as the
 * other's. Without a peer token (TLS-only or --insecure-peers clusters) the
 * HELLO carries `-` and the listener answers WELCOME at once; a node with a
 * token refuses such a HELLO, and one without refuses a nonce.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { PeerProtocolError } from '../errors.js';

/** Bytes of randomness per nonce (sent as hex). */
const NONCE_BYTES = 32;
const NONCE = /^[0-9a-f]{64}$/;
const PROOF = /^[0-9a-f]{64}$/;

export interface AuthParties {
  readonly dialer: string;
  readonly listener: string;
  readonly dialerNonce: string;
  readonly listenerNonce: string;
}

export class PeerAuth {
  private key: Buffer | undefined;

  constructor(peerToken: string | undefined) {
    this.key = peerToken === undefined ? undefined : Buffer.from(peerToken, 'utf8');
  }

  /** True when links must prove the peer token. */
  get enabled(): boolean {
    return this.key !== undefined;
  }

  /** A fresh nonce for a HELLO or CHALLENGE. */
  static nonce(): string {
    return randomBytes(NONCE_BYTES).toString('hex');
  }

  /** Checks a nonce received from the other side (a fixed-length hex string). */
  static checkNonce(text: string | undefined): string {
    if (text === undefined || !NONCE.test(text)) throw new PeerProtocolError('malformed nonce in peer handshake');
    return text;
  }

  private proof(role: 'dialer' | 'listener', p: AuthParties): string {
    if (this.key === undefined) throw new PeerProtocolError('no peer token configured');
    return createHmac('sha256', this.key).update(`ticketing-peer-auth-1 ${role} ${p.dialer} ${p.listener} ${p.dialerNonce} ${p.listenerNonce}`).digest('hex');
  }

  /** Listener: the CHALLENGE line answering a HELLO. */
  challengeLine(p: AuthParties): string {
    return `CHALLENGE ${p.listenerNonce} ${this.proof('listener', p)}\n`;
  }

  /**
   * Dialer: checks a CHALLENGE line; returns the PROOF line to send, or
   * throws PeerProtocolError when the listener did not prove the token.
   */
  answerChallenge(line: string, dialer: string, listener: string, dialerNonce: string): string {
    const f = line.split(' ');
    if (f[0] !== 'CHALLENGE' || f.length !== 3) throw new PeerProtocolError('CHALLENGE expected');
    const p: AuthParties = { dialer, listener, dialerNonce, listenerNonce: PeerAuth.checkNonce(f[1]) };
    if (!sameProof(f[2]!, this.proof('listener', p))) throw new PeerProtocolError('the peer did not prove the peer token');
    return `PROOF ${this.proof('dialer', p)}\n`;
  }

  /** Listener: true when a PROOF line proves the token for this exchange. */
  checkProof(line: string, p: AuthParties): boolean {
    const f = line.split(' ');
    return f[0] === 'PROOF' && f.length === 2 && sameProof(f[1]!, this.proof('dialer', p));
  }
}

/** Constant-time comparison of a received proof with the expected one. */
function sameProof(received: string, expected: string): boolean {
  if (!PROOF.test(received)) return false;
  return timingSafeEqual(Buffer.from(received, 'latin1'), Buffer.from(expected, 'latin1'));
}
