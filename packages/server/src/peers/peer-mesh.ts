/**
 * Links between cluster nodes. Every node keeps one outbound link to each
 * peer (reconnecting quickly when it drops) and accepts one inbound link from
 * each. A node writes only on its outbound links and reads only from its
 * inbound links, so each direction is one ordered stream.
 *
 * A link starts with HELLO and, when a peer token is configured, a mutual
 * challenge-response (peer-auth.ts: the token itself never crosses the wire);
 * with TLS it runs over mutually authenticated TLS, and the peer's
 * certificate must name it (peer-identity.ts). The HELLO carries the cluster
 * identity (cluster-identity.ts): nodes with different peers lists or modes
 * refuse each other, loudly. Nothing a peer sends is read as a message before
 * that. Before it, lines are capped at 1 KiB. A message that does not decode,
 * or that its handler cannot take, closes that link (logged and counted),
 * never the node.
 *
 * Liveness is "heard from within the failover timeout". A closed link is not
 * evidence that the peer is gone (the peer may have dropped a slow link on
 * purpose, a middlebox may have reset it): it is re-dialled at once, and only
 * silence, or our own connection attempt refused (nothing listens on the
 * peer's port: its process is gone), counts.
 */
import type { SecureContextOptions } from 'node:tls';
import { LineFramer } from '@ticketing/protocol';
import type { Logger } from 'pino';
import type { Clock, TimerHandle } from '../seams/clock.js';
import type { Listener, Stream, Transport } from '../seams/transport.js';
import { splitHostPort } from '../net/address.js';
import { PeerProtocolError } from '../errors.js';
import { decodeHandshake, encodeHandshake, type Handshake } from './handshake.js';
import type { PeerInfo } from './members.js';
import { PeerAuth } from './peer-auth.js';
import { certificateNames, type PeerCertificateCheck } from './peer-identity.js';

export interface PeerTls {
  readonly context: SecureContextOptions;
  /**
   * 'names': a peer's certificate must name it (node name or host in its
   * SAN), as any certificate of a shared CA would otherwise pass;
   * 'ca': peers' certificates come from a CA of their own (tls-peer-ca).
   */
  readonly check?: PeerCertificateCheck;
}

/** What the mesh counts for /metrics. */
export interface PeerLinkEvents {
  /** Peer links closed because a message did not decode or could not be handled. */
  badPeerMessages: number;
  /** Peer links refused in the handshake (wrong token or proof, unknown name, certificate not naming the peer). */
  peerAuthFailures: number;
}

export interface MeshHandler<M> {
  /** A message from `peer` on its inbound link, in order. */
  message(peer: string, message: M): void;
  /** Our outbound link to `peer` is ready (after WELCOME). */
  outboundUp(peer: string): void;
  /** Our outbound link to `peer` is gone. */
  outboundDown(peer: string): void;
  /** `peer` opened a (new) inbound link to us: a new stream from it starts. */
  inboundUp(peer: string): void;
  /** `peer`'s inbound link to us is gone (its stream to us ended). */
  inboundDown(peer: string): void;
  /** What was written on our outbound link to `peer` has been sent (see backlog). */
  outboundDrained?(peer: string): void;
  /** Our connection attempt to `peer` was refused: its process is gone (see `reachable`). */
  connectRefused?(peer: string): void;
  /**
   * `message` threw something other than a PeerProtocolError: a fault of our
   * own code, not of the peer's message. The link is closed as for a bad
   * message, and the mode decides what else (a safety assertion stops the node).
   */
  ownError?(peer: string, err: Error): void;
}

/** Beyond this much unsent data on a link the peer is too slow: drop the link (it resyncs). */
const MAX_BUFFERED_BYTES = 64 * 1024 * 1024;
/** Reconnect delay after a failed attempt, doubling per failure up to the maximum. */
const RECONNECT_MS = 100;
const RECONNECT_MAX_MS = 800;
/** After a peer refused us (wrong token, unknown name), retry slowly: only a config change helps. */
const DENIED_RETRY_MS = 5_000;
const HELLO_TIMEOUT_MS = 3_000;
/** How a DENIED for another cluster identity starts. */
const MISMATCH = 'cluster identity mismatch';
/** Peer connections open at once beyond two per peer (each peer has one inbound link; a reconnect briefly two). */
const MAX_EXTRA_INBOUND = 16;
/** Longest line before a link is authenticated (handshake lines are short). */
const HANDSHAKE_MAX_LINE = 1024;
/** Decodes one line of a peer's stream (after the HELLO) from its bytes; throws PeerProtocolError when malformed. */
export type PeerDecoder<M> = (buf: Buffer, start: number, end: number) => M;

class Outbound {
  socket: Stream | undefined;
  ready = false;
  /** The last attempt to connect failed (refused, unreachable, timed out) and none has succeeded since. */
  failed = false;
  /** When an attempt to connect was last refused (ECONNREFUSED): nothing listened on the peer's port. */
  refusedAt = -Infinity;
  failures = 0;
  denied = false;
  out = '';
  flushQueued = false;
  retry: TimerHandle | undefined;
}

export class PeerMesh<M> {
  private server: Listener | undefined;
  private readonly outbound = new Map<string, Outbound>();
  private readonly inbound = new Map<string, Stream>();
  private readonly lastHeard = new Map<string, number>();
  /** Peers whose cluster identity differs from ours (either side refused the link for it). */
  private readonly mismatched = new Set<string>();
  /** Proves and checks the peer token (disabled when none is configured). */
  private readonly auth: PeerAuth;
  private closed = false;

  constructor(
    private readonly self: PeerInfo,
    /** Who may link up; Raft membership changes replace it (setPeers). */
    public peers: readonly PeerInfo[],
    private readonly peerToken: string | undefined,
    private tls: PeerTls | undefined,
    private readonly transport: Transport,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly handler: MeshHandler<M>,
    private readonly decode: PeerDecoder<M>,
    /** This cluster's identity (cluster-identity.ts): a HELLO with another one is refused. */
    private readonly clusterId: string,
    /** Longest line a peer may send (Raft appends and snapshot chunks are long). */
    private readonly maxLine = 1024,
    private readonly events: PeerLinkEvents = { badPeerMessages: 0, peerAuthFailures: 0 },
  ) {
    this.auth = new PeerAuth(peerToken);
    for (const p of peers) this.outbound.set(p.name, new Outbound());
  }

  /**
   * The peers changed (a Raft membership change): a new one is dialled, a
   * gone one is dropped (its links closed, its HELLO refused from now on), a
   * moved one is dialled at its new address.
   */
  setPeers(peers: readonly PeerInfo[]): void {
    const before = new Map(this.peers.map((p) => [p.name, p]));
    this.peers = peers;
    for (const [name, old] of before) {
      const now = peers.find((p) => p.name === name);
      if (now !== undefined && now.peerAddress === old.peerAddress && now.alternatePeerAddress === old.alternatePeerAddress) continue;
      const link = this.outbound.get(name)!;
      link.retry?.cancel();
      if (now === undefined) {
        this.outbound.delete(name);
        this.inbound.get(name)?.destroy();
      }
      if (link.socket !== undefined) link.socket.destroy(); // its close redials the current address, if it is still a peer
      else if (now !== undefined && this.server !== undefined) this.connect(now);
    }
    for (const p of peers) {
      if (before.has(p.name)) continue;
      this.outbound.set(p.name, new Outbound());
      if (this.server !== undefined) this.connect(p);
    }
  }

  /** New certificates for links made from now on (SIGHUP); open links keep theirs. */
  updateTls(tls: PeerTls): void {
    this.tls = tls;
    this.server?.updateTls(tls.context);
  }

  /** Every stream accepted and not yet closed (links and handshakes in progress). */
  private readonly accepted = new Set<Stream>();
  /** Connections accepted (TLS handshakes included) that have not closed, authenticated links included. */
  private openInbound = 0;

  async listen(address: string): Promise<string> {
    const { host, port } = splitHostPort(address);
    const tls = this.tls && {
      context: this.tls.context,
      requestCert: true,
      onHandshakeError: (err: Error, remote: string | undefined) => this.logger.warn({ remote, err }, 'peer TLS handshake failed'),
    };
    this.server = await this.transport.listen(
      {
        host,
        port,
        ...(tls === undefined ? {} : { tls }),
        // Links not yet authenticated are bounded: a peer port flood cannot take every file descriptor.
        admit: () => {
          if (this.openInbound >= MAX_EXTRA_INBOUND + 2 * this.peers.length) return undefined;
          this.openInbound++;
          let counted = true;
          return () => {
            if (counted) this.openInbound--;
            counted = false;
          };
        },
        onError: (err) => this.logger.error({ err }, 'peer listener error; still listening'),
      },
      (stream) => this.acceptInbound(stream),
    );
    for (const p of this.peers) this.connect(p);
    const a = this.server.address();
    return `${a.address}:${a.port}`;
  }

  /**
   * Heard from `peer` within `timeoutMs`, and no connection attempt refused
   * since. A closed link alone does not make a peer unreachable.
   */
  reachable(peer: string, timeoutMs: number): boolean {
    const t = this.lastHeard.get(peer);
    return t !== undefined && this.clock.now() - t < timeoutMs && !(this.outbound.get(peer)!.refusedAt > t);
  }

  /** Milliseconds since `peer` was last heard (Infinity: never). */
  silentFor(peer: string): number {
    const t = this.lastHeard.get(peer);
    return t === undefined ? Infinity : this.clock.now() - t;
  }

  /** `peer`'s stream to us is open right now. */
  hasInbound(peer: string): boolean {
    return this.inbound.has(peer);
  }

  /** Our last attempt to reach `peer` was refused and none has succeeded since: it is not running. */
  connectRefused(peer: string): boolean {
    const link = this.outbound.get(peer);
    return link !== undefined && link.failed && link.refusedAt > (this.lastHeard.get(peer) ?? -Infinity);
  }

  /** Queues `text` on the outbound link to `peer` (written once per tick). False if the link is not up. */
  send(peer: string, text: string): boolean {
    const link = this.outbound.get(peer);
    if (link === undefined || !link.ready) return false;
    link.out += text;
    if (!link.flushQueued) {
      link.flushQueued = true;
      this.clock.defer(() => this.flush(peer, link));
    }
    return true;
  }

  /** Bytes queued toward `peer` and not yet sent (ours and the socket's); undefined when the link is not up. */
  backlog(peer: string): number | undefined {
    const link = this.outbound.get(peer);
    if (link === undefined || !link.ready || link.socket === undefined) return undefined;
    return link.out.length + link.socket.writableLength;
  }

  /** Writes what is queued for `peer` now (before a hand-off message that must follow it). */
  flushNow(peer: string): void {
    const link = this.outbound.get(peer);
    if (link !== undefined) this.flush(peer, link);
  }

  private flush(peer: string, link: Outbound): void {
    link.flushQueued = false;
    if (link.out === '' || link.socket === undefined || !link.ready) return;
    const data = link.out;
    link.out = '';
    link.socket.write(data);
    if (link.socket.writableLength > MAX_BUFFERED_BYTES) {
      this.logger.warn({ peer }, 'peer is not keeping up with replication; dropping the link so it resynchronises');
      link.socket.destroy();
    }
  }

  flushAll(): void {
    for (const [peer, link] of this.outbound) this.flush(peer, link);
  }

  /** Drops our outbound link to `peer` (it reconnects): the peer sees a fresh stream. */
  reset(peer: string): void {
    this.outbound.get(peer)?.socket?.destroy();
  }

  private connect(peer: PeerInfo): void {
    if (this.closed) return;
    const link = this.outbound.get(peer.name)!;
    // Every other attempt goes to the alternate address, when the peer has one.
    const address = peer.alternatePeerAddress !== undefined && link.failures % 2 === 1 ? peer.alternatePeerAddress : peer.peerAddress;
    const { host, port } = splitHostPort(address);
    const nonce = this.auth.enabled ? PeerAuth.nonce() : undefined;
    /** The listener proved the peer token (or none is configured). */
    let proved = !this.auth.enabled;
    const socket = this.transport.connect({ host, port, ...(this.tls === undefined ? {} : { tls: this.tls.context }) }, () => {
      socket.write(encodeHandshake({ type: 'hello', name: this.self.name, nonce, cluster: this.clusterId }));
    });
    link.socket = socket;
    link.ready = false;
    link.out = '';
    // An outbound link only ever reads handshake lines.
    const framer = new LineFramer(HANDSHAKE_MAX_LINE);
    const helloTimer = this.clock.schedule(HELLO_TIMEOUT_MS, () => socket.destroy());
    const refuse = (why: string) => {
      this.events.peerAuthFailures++;
      if (!link.denied) this.logger.error({ peer: peer.name, reason: why }, 'refused the link to a peer');
      link.denied = true;
      socket.destroy();
      return false;
    };
    socket.on('data', (chunk: Buffer) => {
      const result = framer.push(chunk, (buf, s, e) => {
        const line = buf.toString('utf8', s, e);
        if (!link.ready && line.startsWith('CHALLENGE ') && !proved && nonce !== undefined) {
          try {
            socket.write(this.auth.answerChallenge(line, this.self.name, peer.name, nonce));
          } catch (err) {
            return refuse((err as Error).message);
          }
          proved = true;
          return true;
        }
        if (!link.ready && line.startsWith('WELCOME ')) {
          // A listener that skips the challenge has not proved the token: not our peer.
          if (!proved) return refuse('the peer did not prove the peer token');
          if (!this.certificateOk(socket, peer)) return refuse('its TLS certificate does not name it');
          helloTimer.cancel();
          if (line !== `WELCOME ${peer.name}`) {
            // Our peers list has another node's address for this one: never take it for `peer`.
            if (!link.denied) this.logger.error({ peer: peer.name, address: peer.peerAddress, answered: line.slice(8) }, 'another node answers at this peer address; check --peers');
            link.denied = true;
            socket.destroy();
            return false;
          }
          link.ready = true;
          link.failed = false;
          link.failures = 0;
          link.denied = false;
          this.mismatched.delete(peer.name);
          this.handler.outboundUp(peer.name);
        } else if (line.startsWith('DENIED')) {
          if (!link.denied) this.logger.error({ peer: peer.name, reason: line.slice(7, 400) }, 'peer refused this node');
          if (line.startsWith(`DENIED ${MISMATCH}`)) this.mismatched.add(peer.name);
          link.denied = true;
          socket.destroy();
          return false;
        }
        return true;
      });
      if (result === 'toolong') socket.destroy();
    });
    socket.on('drain', () => {
      if (link.socket === socket && link.ready) this.handler.outboundDrained?.(peer.name);
    });
    let refused = false;
    socket.on('error', (err: Error) => {
      refused = (err as NodeJS.ErrnoException).code === 'ECONNREFUSED';
      this.logger.debug({ peer: peer.name, err }, 'peer link error');
    });
    socket.on('close', () => {
      helloTimer.cancel();
      const wasReady = link.ready;
      if (!wasReady) {
        link.failed = true;
        link.failures++;
      }
      if (refused) link.refusedAt = this.clock.now();
      link.ready = false;
      link.socket = undefined;
      if (wasReady) this.handler.outboundDown(peer.name);
      if (refused) this.handler.connectRefused?.(peer.name);
      // A link that was up is re-dialled at once: whether the peer is still there is what we need to know.
      const delay = link.denied ? DENIED_RETRY_MS : wasReady ? 0 : Math.min(RECONNECT_MAX_MS, RECONNECT_MS * 2 ** Math.max(0, link.failures - 1));
      if (!this.closed) {
        link.retry = this.clock.schedule(delay, () => {
          // Redialled where the peer is now, and only while it is one (setPeers).
          const current = this.peers.find((p) => p.name === peer.name);
          if (current !== undefined && this.outbound.get(peer.name) === link) this.connect(current);
        });
      }
    });
  }

  /** With TLS and no CA of the peers' own, the peer's certificate must name it. */
  private certificateOk(socket: Stream, peer: PeerInfo): boolean {
    if (this.tls === undefined || this.tls.check !== 'names') return true;
    const names = certificateNames(socket);
    return names.includes(peer.name) || names.includes(splitHostPort(peer.peerAddress).host);
  }

  private acceptInbound(socket: Stream): void {
    this.accepted.add(socket);
    socket.on('close', () => this.accepted.delete(socket));
    let peer: string | undefined;
    /** Between HELLO and a valid PROOF: what the proof must cover. */
    let pending: { name: string; dialerNonce: string; listenerNonce: string } | undefined;
    const framer = new LineFramer(HANDSHAKE_MAX_LINE);
    const helloTimer = this.clock.schedule(HELLO_TIMEOUT_MS, () => socket.destroy());
    /** Refused (DENIED on its way, or closed): nothing more it sends is read (nor logged). */
    let refused = false;
    socket.on('error', () => {});
    socket.on('data', (chunk: Buffer) => {
      if (refused) return;
      if (peer !== undefined) this.lastHeard.set(peer, this.clock.now());
      const result = framer.push(chunk, (buf, s, e) => {
        try {
          if (peer === undefined) {
            const line = buf.toString('utf8', s, e);
            if (pending !== undefined) {
              const p = pending;
              pending = undefined;
              if (!this.auth.checkProof(line, { dialer: p.name, listener: this.self.name, dialerNonce: p.dialerNonce, listenerNonce: p.listenerNonce })) {
                return this.deny(socket, 'wrong peer token');
              }
              peer = this.welcome(socket, p.name);
            } else {
              const hello = this.checkHello(socket, line.startsWith('HELLO ') ? decodeHandshake(line) : undefined);
              if (hello === undefined) return false;
              if (!this.auth.enabled) {
                peer = this.welcome(socket, hello.name);
              } else {
                pending = { name: hello.name, dialerNonce: hello.nonce!, listenerNonce: PeerAuth.nonce() };
                socket.write(this.auth.challengeLine({ dialer: hello.name, listener: this.self.name, ...pending }));
                return true;
              }
            }
            helloTimer.cancel();
            // Authenticated: from here on lines may be as long as the mode's messages.
            framer.maxLineBytes = this.maxLine;
            return true;
          }
          this.handler.message(peer, this.decode(buf, s, e));
          return true;
        } catch (err) {
          // Whatever a peer sends costs at most its own link: never an exception past it.
          this.events.badPeerMessages++;
          if (err instanceof PeerProtocolError) this.logger.warn({ peer, remote: socket.remoteAddress, err }, 'bad peer message; closing the link');
          else {
            this.logger.error({ peer, remote: socket.remoteAddress, err }, 'a peer message could not be handled; closing the link');
            // Ours, not the peer's: never swallowed with the link (issue 27, D-9).
            if (peer !== undefined) this.handler.ownError?.(peer, err as Error);
          }
          socket.destroy();
          return false;
        }
      });
      if (result === 'stopped') refused = true;
      if (result === 'toolong') {
        refused = true;
        this.events.badPeerMessages++;
        this.logger.warn({ peer, remote: socket.remoteAddress, limit: framer.maxLineBytes }, 'peer line too long; closing the link');
        socket.destroy();
      }
    });
    socket.on('close', () => {
      helloTimer.cancel();
      if (peer !== undefined && this.inbound.get(peer) === socket) {
        this.inbound.delete(peer);
        this.handler.inboundDown(peer);
      }
    });
  }

  private deny(socket: Stream, reason: string): false {
    this.events.peerAuthFailures++;
    this.logger.warn({ remote: socket.remoteAddress, reason }, 'refused a peer link');
    socket.end(encodeHandshake({ type: 'denied', reason }));
    return false;
  }

  /** Checks a HELLO: a known peer, a nonce exactly when a peer token is configured, a certificate that names it. */
  private checkHello(socket: Stream, msg: Handshake | undefined): (Handshake & { type: 'hello' }) | undefined {
    if (msg?.type !== 'hello') {
      this.deny(socket, 'HELLO expected');
      return undefined;
    }
    const known = this.peers.find((p) => p.name === msg.name);
    if (known === undefined) {
      this.deny(socket, `unknown node name ${msg.name.slice(0, 64)}`);
      return undefined;
    }
    const mismatch = this.identityMismatch(msg.cluster);
    if (mismatch !== undefined) {
      this.mismatched.add(known.name);
      this.deny(socket, mismatch);
      return undefined;
    }
    if (this.auth.enabled && msg.nonce === undefined) {
      this.deny(socket, 'this cluster requires the peer token');
      return undefined;
    }
    if (!this.auth.enabled && msg.nonce !== undefined) {
      this.deny(socket, 'this node has no peer token');
      return undefined;
    }
    if (!this.certificateOk(socket, known)) {
      this.deny(socket, `the TLS certificate does not name ${known.name}`);
      return undefined;
    }
    return msg;
  }

  /** The link from `name` is authenticated: it replaces any earlier one. */
  private welcome(socket: Stream, name: string): string {
    const previous = this.inbound.get(name);
    this.inbound.set(name, socket);
    previous?.destroy();
    this.lastHeard.set(name, this.clock.now());
    socket.write(encodeHandshake({ type: 'welcome', name: this.self.name }));
    this.handler.inboundUp(name);
    this.redialNow(name);
    return name;
  }

  /**
   * The peer just dialled us, so it is up: a link to it that is waiting out a
   * reconnect backoff is dialled now. Otherwise the peer hears nothing from us
   * until the backoff ends (up to RECONNECT_MAX_MS) and may take our silence
   * for our death (priority simulation seed 200794: a restarted standby
   * promoted while the active, still backing off, had not dialled it again).
   */
  private redialNow(name: string): void {
    const link = this.outbound.get(name);
    const peer = this.peers.find((p) => p.name === name);
    if (link === undefined || peer === undefined || link.socket !== undefined || link.denied || this.closed) return;
    link.retry?.cancel();
    link.retry = undefined;
    link.failures = 0;
    this.connect(peer);
  }

  /**
   * Peers started with another peers list or mode than ours. Until that is
   * fixed nobody can tell which list is right: a node that is not serving yet
   * must not start (it might share a token residue with another active).
   */
  get misconfiguredPeers(): string[] {
    return [...this.mismatched];
  }

  /** Why a peer's cluster identity differs from ours (undefined: it does not). */
  private identityMismatch(theirs: string): string | undefined {
    if (theirs === this.clusterId) return undefined;
    return `${MISMATCH} (ours ${this.clusterId}, yours ${theirs.slice(0, 64)}): the nodes were started with different --peers lists (names or order) or --mode; give every node the same`;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const link of this.outbound.values()) {
      link.retry?.cancel();
      link.socket?.destroy();
    }
    // Every accepted stream, not only the links that finished their HELLO: the listener's close
    // waits for all of them, and a peer that never completes its handshake would hold it open.
    for (const s of this.accepted) s.destroy();
    await this.server?.close();
  }
}
