/**
 * Which peer a TLS certificate names. With a CA shared with application
 * clients (docs/security.md once advised it), "signed by the CA" says nothing
 * about being a peer: unless peers have a CA of their own (tls-peer-ca), a
 * peer's certificate must carry its node name or its host in the subject
 * alternative names.
 */
import type { Stream } from '../seams/transport.js';

/** 'names': the certificate must name the peer; 'ca': any certificate of the peers' own CA. */
export type PeerCertificateCheck = 'names' | 'ca';

/** A TLS stream can show the certificate its peer presented (node:tls sockets do). */
interface WithCertificate {
  getPeerCertificate?(): { subjectaltname?: string } | null | undefined;
}

/** The DNS names and IP addresses in the SAN of the certificate the other side presented (none over plain TCP). */
export function certificateNames(stream: Stream): string[] {
  const cert = (stream as unknown as WithCertificate).getPeerCertificate?.();
  const san = cert?.subjectaltname;
  if (typeof san !== 'string' || san === '') return [];
  return parseSubjectAltName(san);
}

/** `DNS:a, IP Address:127.0.0.1` -> ['a', '127.0.0.1']. */
export function parseSubjectAltName(san: string): string[] {
  return san
    .split(', ')
    .map((entry) => {
      const colon = entry.indexOf(':');
      const kind = entry.slice(0, colon);
      return kind === 'DNS' || kind === 'IP Address' ? entry.slice(colon + 1) : undefined;
    })
    .filter((n): n is string => n !== undefined && n !== '');
}
