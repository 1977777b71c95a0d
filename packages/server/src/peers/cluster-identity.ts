/**
 * Cluster identity: what two nodes must agree on before they link. Nodes
 * started with different peers lists (another order, another member, another
 * mode) would each believe different things about priority and token
 * residues: in a priority cluster two of them could both think they are the
 * highest-priority node and share a residue (duplicate tokens), in Raft mode
 * they would count different majorities. The handshake carries this hash and
 * a mismatch refuses the link, logged on both sides.
 *
 * The hash covers the mode and, in priority mode, the peers' names in order
 * (order is priority and token residue there); in Raft mode the mode only
 * (its membership is in its log and may change), not their
 * addresses: a node may legitimately reach a peer through another address
 * than the peer's own configuration says (NAT, a proxy, a DNS name versus an
 * IP address). A wrong address is caught instead by the name the peer
 * answers with (WELCOME <name>), which the dialer checks.
 */
import { createHash } from 'node:crypto';
import type { PeerInfo } from './members.js';

export function clusterIdentity(mode: string, members: readonly PeerInfo[]): string {
  // Raft membership changes through its log (raft/configuration.ts): nodes of one cluster may
  // rightly list different members for a while, and the log, not this hash, decides who counts.
  const names = mode === 'raft' ? [] : [...members].sort((x, y) => x.index - y.index).map((p) => p.name);
  return createHash('sha256').update(`${mode}\n${names.join(',')}`).digest('hex').slice(0, 16);
}
