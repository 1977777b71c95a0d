/**
 * TLS for peer links: the node's certificate and the CA that verifies peers.
 * With `tls-peer-ca` peers are verified against a CA of their own and any of
 * its certificates is a peer; without it they are verified against `tls-ca`
 * (which may also sign application clients), so a peer's certificate must
 * also name the peer (peer-identity.ts).
 */
import type { ServerConfig } from '../config/load.js';
import { loadPeerTlsContext } from '../net/tls-config.js';
import type { PeerTls } from './peer-mesh.js';

export function loadPeerTls(config: ServerConfig): PeerTls | undefined {
  const tls = loadPeerTlsContext(config);
  return tls && { context: tls.context, check: tls.ownCa ? 'ca' : 'names' };
}
