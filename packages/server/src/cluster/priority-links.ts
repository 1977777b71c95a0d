/**
 * The peer links a priority cluster needs, over the shared peer mesh
 * (peers/peer-mesh.ts): one narrow interface, so the role machine's shell
 * does not depend on how the mesh authenticates, encrypts or retries.
 *
 * What the shell relies on: messages in order per peer; our outbound link
 * up or down; the peer's stream to us started or ended; and two kinds of
 * evidence from our own dials only (never from a connection that has not
 * proved itself): "nothing listens on its peer port" (its process is gone)
 * and "its process answered and refused the link" (it is alive, with another
 * configuration or peer token).
 *
 * The cluster identity is computed for "priority-v2": this peer protocol
 * (epochs, clock stamps) is not the earlier one's, so nodes of an earlier
 * version refuse the link by identity instead of failing on its messages.
 * Peer protocol 3 keeps that identity: it only adds to version 2 (DECLINED,
 * HANDOFF's serial), on links negotiated at 3, so a node of release 0.1.0
 * (version 2) links with this one.
 */
import { clusterIdentity } from '../peers/cluster-identity.js';
import type { PeerInfo } from '../peers/members.js';
import { PeerMesh } from '../peers/peer-mesh.js';
import type { PeerProtocol } from '../peers/handshake.js';
import { loadPeerTls } from '../peers/peer-tls.js';
import type { ModeHost } from '../node/mode.js';
import type { ReplicationLink } from './replication-source.js';
import { decodePeerLine, type PeerMessage } from './peer-protocol.js';

export interface PriorityLinkEvents {
  message(peer: string, message: PeerMessage): void;
  outboundUp(peer: string): void;
  outboundDown(peer: string): void;
  inboundUp(peer: string): void;
  inboundDown(peer: string): void;
  connectRefused(peer: string): void;
  linkRefused(peer: string, reason: string): void;
}

/** What a mesh reports of a refused dial: a reason, or evidence with one (issue 25's mesh). */
type Refusal = string | { readonly reason: string; readonly detail?: string };

export interface PriorityLinks extends ReplicationLink {
  listen(address: string): Promise<string>;
  hasInbound(peer: string): boolean;
  /** The peer protocol version our link to `peer` runs at (undefined while it is down): version 3 carries DECLINED and HANDOFF's serial. */
  outboundVersion(peer: string): PeerProtocol | undefined;
  /** /status: the versions of the links with `peer` that are up. */
  linkVersions(peer: string): { outbound?: PeerProtocol; inbound?: PeerProtocol } | undefined;
  /** Drops our outbound link to `peer` (it is re-dialled): the peer sees a fresh stream. */
  reset(peer: string): void;
  /** Dials `peer` now (fresh evidence about it). */
  dialNow(peer: string): void;
  flushAll(): void;
  /** New certificates from the host's reloaded configuration; false when peer TLS is off. */
  updateTls(): boolean;
  close(): Promise<void>;
}

/** The mode name in the cluster identity: see the header. */
export const PRIORITY_IDENTITY_MODE = 'priority-v2';

export function createPriorityLinks(host: ModeHost, self: PeerInfo, others: readonly PeerInfo[], all: readonly PeerInfo[], events: PriorityLinkEvents): PriorityLinks {
  const mesh = new PeerMesh<PeerMessage>(
    self,
    others,
    loadPeerTls(host.config),
    host.env.transport,
    host.clock,
    host.logger,
    { ...events, linkRefused: (peer: string, r: Refusal) => events.linkRefused(peer, typeof r === 'string' ? r : `${r.reason}${r.detail === undefined ? '' : `: ${r.detail}`}`) },
    decodePeerLine,
    clusterIdentity(PRIORITY_IDENTITY_MODE, all),
    undefined,
    host.events,
    host.peerProtocols,
  );
  return {
    listen: async (address) => mesh.listen(address),
    send: (peer, text) => mesh.send(peer, text),
    flushNow: (peer) => mesh.flushNow(peer),
    flushAll: () => mesh.flushAll(),
    hasInbound: (peer) => mesh.hasInbound(peer),
    outboundVersion: (peer) => mesh.outboundVersion(peer),
    linkVersions: (peer) => mesh.linkVersions(peer),
    reset: (peer) => mesh.reset(peer),
    dialNow: (peer) => mesh.redialNow(peer),
    updateTls: () => {
      const tls = loadPeerTls(host.config);
      if (tls === undefined) return false;
      mesh.updateTls(tls);
      return true;
    },
    close: async () => mesh.close(),
  };
}
