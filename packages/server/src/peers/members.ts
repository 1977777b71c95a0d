/**
 * Cluster membership from the configuration, shared by both replication
 * modes: the `peers` list in priority order, and where peer links listen.
 */
import { joinHostPort, splitHostPort } from '../net/address.js';

export interface PeerInfo {
  readonly name: string;
  /** 0 = highest priority. */
  readonly index: number;
  /** Client address (what M replies carry). */
  readonly clientAddress: string;
  /** Peer-to-peer address. */
  readonly peerAddress: string;
  /**
   * Another peer-to-peer address to try when `peerAddress` fails (Raft: the
   * membership's, when this node's --peers names the peer elsewhere).
   */
  readonly alternatePeerAddress?: string;
}

/** The peer port of a node: its client port + 1. */
export function defaultPeerListen(listen: string): string {
  const { host, port } = splitHostPort(listen);
  return joinHostPort(host, port + 1);
}

/** Parses the peers setting: NAME=HOST:PORT in priority order; each peer port is its client port + 1. */
export function parsePeers(peers: readonly string[]): PeerInfo[] {
  return peers.map((entry, index) => {
    const eq = entry.indexOf('=');
    const clientAddress = entry.slice(eq + 1);
    return { name: entry.slice(0, eq), index, clientAddress, peerAddress: defaultPeerListen(clientAddress) };
  });
}
