/**
 * TLS for every peer link (docs/security.md, "The peer channel"):
 *
 * - with tls-cert: mutual TLS 1.3 with the node's certificate. Peers are
 *   verified against `tls-peer-ca` (a CA of their own: any of its
 *   certificates is a peer) or else `tls-ca`, which may also sign
 *   application clients: then a peer's certificate must name the node
 *   (DNS:<node name> in its SAN, peer-identity.ts). A peer token, when also
 *   set, is proved inside the session too (peer-keys.ts).
 * - with a peer token alone: TLS 1.3 with an external pre-shared key derived
 *   from the token (psk_dhe_ke: an ephemeral key exchange too, so recorded
 *   traffic stays secret even if the token leaks later).
 * - with neither (--insecure-peers, loopback only): undefined, plain TCP.
 */
import type { SecureContextOptions } from 'node:tls';
import type { ServerConfig } from '../config/load.js';
import { loadPeerTlsContext } from '../net/tls-config.js';
import { PeerKeys } from './peer-keys.js';
import type { PeerCertificateCheck } from './peer-identity.js';

/** AES-GCM first (hardware AES), ChaCha20 where it is faster; both AEADs with SHA-256, the hash the PSK is tied to. */
const PEER_CIPHERS = 'TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256';

export interface PeerTls {
  /** 'psk': TLS keyed by the peer tokens; 'certificate': mutual TLS with the node's certificate. */
  readonly kind: 'psk' | 'certificate';
  readonly context: SecureContextOptions;
  /**
   * Certificates only. 'names': a peer's certificate must name it (DNS:<node
   * name> in its SAN), as any certificate of a shared CA would otherwise
   * pass; 'ca': peers' certificates come from a CA of their own (tls-peer-ca).
   */
  readonly check?: PeerCertificateCheck;
  /** The peer tokens (psk: the TLS keys; certificate: proved inside the session too), if any. */
  readonly keys: PeerKeys | undefined;
}

export function loadPeerTls(config: ServerConfig): PeerTls | undefined {
  const token = config['peer-token'];
  const keys = token === undefined ? undefined : new PeerKeys(token, config['peer-token-next']);
  const certificates = loadPeerTlsContext(config);
  if (certificates !== undefined) {
    return { kind: 'certificate', context: { ...certificates.context, minVersion: 'TLSv1.3' }, check: certificates.ownCa ? 'ca' : 'names', keys };
  }
  if (keys === undefined) return undefined;
  return { kind: 'psk', context: { minVersion: 'TLSv1.3', ciphers: PEER_CIPHERS }, keys };
}

/** How this node's peer links authenticate; changing it needs a restart (a listener is TLS-PSK, mutual TLS or plain). */
export function peerLinkKind(config: ServerConfig): PeerTls['kind'] | 'plain' {
  return config['tls-cert'] !== undefined ? 'certificate' : config['peer-token'] !== undefined ? 'psk' : 'plain';
}
