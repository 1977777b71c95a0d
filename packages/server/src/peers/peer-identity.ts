/**
 * Which node a peer's TLS certificate names. With a CA shared with
 * application clients, "signed by the CA" says nothing about being a peer,
 * and neither does naming the peer's host: an application's client
 * certificate for the same machine (SAN IP:10.0.0.1) would pass. Unless
 * peers have a CA of their own (tls-peer-ca), a peer's certificate must
 * carry its node name as a DNS name in its subject alternative names.
 */
import type { PeerCertificate } from 'node:tls';
import type { Stream } from '../seams/transport.js';

/** 'names': the certificate must name the node; 'ca': any certificate of the peers' own CA. */
export type PeerCertificateCheck = 'names' | 'ca';

/** A TLS stream can show the certificate its peer presented (node:tls sockets do). */
interface WithCertificate {
  getPeerCertificate?(): { subjectaltname?: string } | null | undefined;
}

/** The certificate the other side of `stream` presented (undefined over plain TCP). */
export function streamCertificate(stream: Stream): { subjectaltname?: string } | undefined {
  return (stream as unknown as WithCertificate).getPeerCertificate?.() ?? undefined;
}

/** True when `cert` names node `name` (DNS:<name> in its SAN; DNS names compare without case). */
export function certificateNames(cert: Pick<PeerCertificate, 'subjectaltname'> | { subjectaltname?: string } | undefined, name: string): boolean {
  const san = cert?.subjectaltname;
  return typeof san === 'string' && parseSubjectAltName(san).dns.some((d) => d.toLowerCase() === name.toLowerCase());
}

/** `DNS:a, IP Address:127.0.0.1` -> { dns: ['a'], ip: ['127.0.0.1'] }. */
export function parseSubjectAltName(san: string): { dns: string[]; ip: string[] } {
  const dns: string[] = [];
  const ip: string[] = [];
  for (const entry of san.split(', ')) {
    const colon = entry.indexOf(':');
    const value = entry.slice(colon + 1);
    if (value === '') continue;
    if (entry.startsWith('DNS:')) dns.push(value);
    else if (entry.startsWith('IP Address:')) ip.push(value);
  }
  return { dns, ip };
}
