/**
 * Links between cluster nodes. Every node keeps one outbound link to each
 * peer (reconnecting quickly when it drops) and accepts one inbound link from
 * each. A node writes only on its outbound links and reads only from its
 * inbound links, so each direction is one ordered stream.
 *
 * Every link runs inside TLS (peer-tls.ts): keyed by the peer token, or
 * mutual TLS with certificates that name the node (peer-identity.ts); plain
 * TCP only with --insecure-peers, on loopback. Inside it the dialer says
 * HELLO with its name and the cluster identity (handshake.ts); the listener
 * compares the cluster identity first, then the name. Nothing a connection
 * sends before it authenticated changes anything here: no mark, no role
 * input, no log line above debug. Before the HELLO, lines are capped at 1
 * KiB; connections still authenticating are held in a bounded pool with a
 * deadline (net/pending-pool.ts) apart from the links of known peers. A
 * message that does not decode, or that its handler cannot take (a value out
 * of range: peer-bounds.ts), closes that link (logged and counted), never
 * the node.
 *
 * What the modes learn about a peer comes from our own outbound dial to its
 * configured address: whether it is up (WELCOME), gone (nothing listens:
 * connection refused), or alive but refusing us (another cluster identity,
 * peer token, name or version: `refusal`). Keeping a node out on such
 * evidence is safe; nothing an inbound connection claims is evidence.
 *
 * Versions (handshake.ts): a node speaks the peer protocol versions its
 * wiring gives the mesh (PEER_PROTOCOLS: 3 and 2). A dial offers the newest
 * first; a peer that answers `DENIED version` is dialled again at once with
 * the next older one (like the other token of a rotation), and only a
 * `DENIED version` to the oldest is a refusal. The version each link runs
 * at is the mode's to read: what it may send on an outbound link
 * (outboundVersion, and `outboundUp`), how to decode an inbound one (the
 * decoder gets it with every line, and `inboundUp` names it).
 *
 * Liveness is "heard from within the failover timeout". A closed link is not
 * evidence that the peer is gone (the peer may have dropped a slow link on
 * purpose, a middlebox may have reset it): it is re-dialled at once, and only
 * silence, or our own connection attempt refused (nothing listens on the
 * peer's port: its process is gone), counts.
 */
import { LineFramer } from '@ticketing/protocol';
import type { Logger } from 'pino';
import type { Clock, TimerHandle } from '../seams/clock.js';
import type { ConnectTls, Listener, ListenTls, Stream, Transport } from '../seams/transport.js';
import { splitHostPort } from '../net/address.js';
import { PendingPool } from '../net/pending-pool.js';
import { PeerProtocolError } from '../errors.js';
import { decodeHandshake, encodeHandshake, PEER_PROTOCOLS, peerProtocols, type DenialCode, type Handshake, type PeerProtocol } from './handshake.js';
import type { PeerInfo } from './members.js';
import { EXPORTER_BYTES, EXPORTER_CONTEXT, EXPORTER_LABEL, type ProofRole } from './peer-keys.js';
import { PeerValueOutOfRange } from './peer-bounds.js';
import { certificateNames, streamCertificate } from './peer-identity.js';
import type { PeerTls } from './peer-tls.js';

export type { PeerTls } from './peer-tls.js';

/** What the mesh counts for /metrics. */
export interface PeerLinkEvents {
  /** Peer links closed because a message did not decode or could not be handled. */
  badPeerMessages: number;
  /** Peer links refused in the handshake, either side (TLS, cluster identity, name, proof, certificate). */
  peerAuthFailures: number;
  /** Links closed for a value out of range, by message field (peer-bounds.ts). */
  peerValuesOutOfRange?: Record<string, number>;
  /** Unauthenticated peer connections closed to make room or past their deadline (net/pending-pool.ts). */
  peerConnectionsShed?: number;
}

/**
 * Why a configured peer refused our outbound link: it answered, so it is
 * alive, but it will not link with us.
 * - 'cluster-identity': it was started with another peers list (members or order) or mode;
 * - 'peer-token': its TLS refused our key (it has another peer token), or its in-session proof failed;
 * - 'name': it does not know our name, or another node answers at its address;
 * - 'version': it speaks another peer protocol (or no TLS);
 * - 'certificate': a certificate does not verify or does not name the node (either side).
 */
export type LinkRefusal = 'cluster-identity' | 'peer-token' | 'name' | 'version' | 'certificate';

export interface RefusalEvidence {
  readonly reason: LinkRefusal;
  /** clock.now() of the latest dial it refused. */
  readonly at: number;
  /** For logs and /status (never a secret). */
  readonly detail: string;
}

export interface MeshHandler<M> {
  /** A message from `peer` on its inbound link, in order. */
  message(peer: string, message: M): void;
  /** Our outbound link to `peer` is ready (after WELCOME), at peer protocol `version`: what we may send on it. */
  outboundUp(peer: string, version: PeerProtocol): void;
  /** Our outbound link to `peer` is gone. */
  outboundDown(peer: string): void;
  /** `peer` opened a (new) inbound link to us, at peer protocol `version`: a new stream from it starts. */
  inboundUp(peer: string, version: PeerProtocol): void;
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
  /** Our dial reached `peer` and it refused the link (see `refusal`): it is alive. Once per refused dial. */
  linkRefused?(peer: string, evidence: RefusalEvidence): void;
}

/** Beyond this much unsent data on a link the peer is too slow: drop the link (it resyncs). */
const MAX_BUFFERED_BYTES = 64 * 1024 * 1024;
/** Reconnect delay after a failed attempt, doubling per failure up to the maximum. */
const RECONNECT_MS = 100;
const RECONNECT_MAX_MS = 800;
/** After a peer refused us, retry at this pace: only a config change helps, and the modes want to know when it did. */
const REFUSED_RETRY_MS = 1_000;
/** From accept (or dial) to an authenticated link, TLS handshake and HELLO included, at most. */
const HANDSHAKE_DEADLINE_MS = 3_000;
/**
 * A dial not connected by then is dead (its SYN went into a cut that has
 * healed since, or to a host that vanished): dial again rather than wait out
 * the handshake deadline, during which the peer hears nothing from us
 * (priority simulation seed 97: two actives for 3 s after a partition healed).
 */
const CONNECT_TIMEOUT_MS = 1_000;
/** Longest line before a link is authenticated (handshake lines are short). */
const HANDSHAKE_MAX_LINE = 1024;
/** Unauthenticated connections held at once: per source address, and in all (beyond: the oldest is closed). */
const PENDING_PER_ADDRESS_BEYOND_PEERS = 2;
const PENDING_BEYOND_PEERS = 8;
/**
 * Decodes one line of a peer's stream (after the HELLO) from its bytes, as
 * peer protocol `version` (the inbound link's) defines it; throws
 * PeerProtocolError when malformed, or not part of that version.
 */
export type PeerDecoder<M> = (buf: Buffer, start: number, end: number, version: PeerProtocol) => M;

const DENIAL_TO_REFUSAL: Readonly<Record<DenialCode, LinkRefusal>> = {
  cluster: 'cluster-identity',
  name: 'name',
  version: 'version',
  token: 'peer-token',
  certificate: 'certificate',
};

class Outbound {
  socket: Stream | undefined;
  ready = false;
  /** The last attempt to connect failed (refused, unreachable, timed out) and none has succeeded since. */
  failed = false;
  /** When an attempt to connect was last refused (ECONNREFUSED): nothing listened on the peer's port. */
  refusedAt = -Infinity;
  failures = 0;
  /** Which peer token the next dial offers (0: peer-token, 1: peer-token-next). */
  token = 0;
  /** Dials in a row whose TLS handshake the peer refused (one per token before it counts as a refusal). */
  tlsRefusals = 0;
  /** Which of the versions we speak the next dial offers (0: the newest); a `DENIED version` moves it on. */
  offer = 0;
  /** The version the link runs at while it is up. */
  version: PeerProtocol | undefined;
  /** The version the last link came up at (a change is logged). */
  lastVersion: PeerProtocol | undefined;
  refusal: RefusalEvidence | undefined;
  /** The current dial's connection is up (its handshake may still be under way). */
  connected = false;
  out = '';
  flushQueued = false;
  retry: TimerHandle | undefined;
  /** redialNow dropped the dial under way: its close dials again at once, whatever the backoff or an old refusal says. */
  startOver = false;
}

/** A failed dial's error, as evidence: a TLS-level refusal, or nothing (network trouble). */
function tlsRefusalOf(err: NodeJS.ErrnoException, kind: PeerTls['kind'] | undefined): LinkRefusal | undefined {
  const code = err.code ?? '';
  if (kind === undefined || code === '' || /^E[A-Z]+$/.test(code)) return undefined; // ECONNRESET, ETIMEDOUT, ...
  if (code.includes('WRONG_VERSION_NUMBER')) return 'version';
  if (code.includes('ALERT')) return kind === 'psk' ? 'peer-token' : 'certificate';
  return 'certificate'; // our own verification of its certificate failed
}

export class PeerMesh<M> {
  private server: Listener | undefined;
  private readonly outbound = new Map<string, Outbound>();
  private readonly inbound = new Map<string, Stream>();
  private readonly lastHeard = new Map<string, number>();
  /** The version each inbound link runs at. */
  private readonly inboundVersions = new Map<string, PeerProtocol>();
  /** The peer protocol versions this node speaks, newest first. */
  readonly speaks: readonly PeerProtocol[];
  /** Accepted connections that have not authenticated yet (TLS handshakes included). */
  private readonly pending: PendingPool;
  private closed = false;

  constructor(
    private readonly self: PeerInfo,
    /** Who may link up; Raft membership changes replace it (setPeers). */
    public peers: readonly PeerInfo[],
    /** Undefined: plain TCP (--insecure-peers, loopback only). */
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
    /**
     * The peer protocol versions this node speaks (the node's wiring: every
     * version this release knows, unless a test or the simulator stands a
     * node in for an older release).
     */
    speaks: readonly number[] = PEER_PROTOCOLS,
  ) {
    this.speaks = peerProtocols(speaks);
    for (const p of peers) this.outbound.set(p.name, new Outbound());
    this.pending = new PendingPool(clock, {
      perAddress: PENDING_PER_ADDRESS_BEYOND_PEERS + peers.length,
      total: PENDING_BEYOND_PEERS + 2 * peers.length,
      deadlineMs: HANDSHAKE_DEADLINE_MS,
    });
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

  /** New certificates and peer tokens for links made from now on (SIGHUP); open links keep theirs. */
  updateTls(tls: PeerTls): void {
    this.tls = tls;
    this.server?.updateTls(tls.context);
  }

  /** Every stream accepted and not yet closed (links and handshakes in progress). */
  private readonly accepted = new Set<Stream>();

  async listen(address: string): Promise<string> {
    const { host, port } = splitHostPort(address);
    this.server = await this.transport.listen(
      {
        host,
        port,
        ...(this.tls === undefined ? {} : { tls: this.listenTls(this.tls) }),
        admit: (remote, connection) => {
          const release = this.pending.admit(remote, connection);
          return () => {
            release();
            this.countShed();
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

  private listenTls(tls: PeerTls): ListenTls {
    return {
      context: tls.context,
      requestCert: tls.kind === 'certificate',
      handshakeTimeoutMs: HANDSHAKE_DEADLINE_MS,
      // Whoever failed to authenticate is nobody: not worth more than a debug line.
      onHandshakeError: (err, remote) => {
        this.events.peerAuthFailures++;
        this.logger.debug({ remote, err }, 'peer TLS handshake failed');
      },
      // The keys are read at each handshake, so a reload applies to the next one (the lookup is a fresh closure).
      ...(tls.kind === 'psk' ? { psk: (identity: string) => this.tls?.keys?.lookup(identity) } : {}),
    };
  }

  private countShed(): void {
    this.events.peerConnectionsShed = this.pending.shed + this.pending.expired;
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

  /** The peer protocol version our outbound link to `peer` runs at (undefined while it is down): what we may send. */
  outboundVersion(peer: string): PeerProtocol | undefined {
    const link = this.outbound.get(peer);
    return link?.ready === true ? link.version : undefined;
  }

  /** The peer protocol version of `peer`'s inbound link to us (undefined while there is none). */
  inboundVersion(peer: string): PeerProtocol | undefined {
    return this.inbound.has(peer) ? this.inboundVersions.get(peer) : undefined;
  }

  /** /status: the versions of the links with `peer` that are up (undefined: none is). */
  linkVersions(peer: string): { outbound?: PeerProtocol; inbound?: PeerProtocol } | undefined {
    const outbound = this.outboundVersion(peer);
    const inbound = this.inboundVersion(peer);
    if (outbound === undefined && inbound === undefined) return undefined;
    return { ...(outbound === undefined ? {} : { outbound }), ...(inbound === undefined ? {} : { inbound }) };
  }

  /** Our last attempt to reach `peer` was refused and none has succeeded since: it is not running. */
  connectRefused(peer: string): boolean {
    const link = this.outbound.get(peer);
    return link !== undefined && link.failed && link.refusedAt > (this.lastHeard.get(peer) ?? -Infinity);
  }

  /**
   * `peer` answered our latest dials and refused the link (see LinkRefusal),
   * so it is alive; undefined when it linked since, or nothing listens at its
   * address. Only our own outbound dials to its configured address set it.
   */
  refusal(peer: string): RefusalEvidence | undefined {
    return this.outbound.get(peer)?.refusal;
  }

  /**
   * Peers that are alive but refuse our link (another peers list or mode,
   * another peer token, another protocol version, a certificate). Until that
   * is fixed nobody can tell which side is right: a node that is not serving
   * yet must not start serving past them (it might share a token residue
   * with another active, or two nodes would serve).
   */
  get misconfiguredPeers(): string[] {
    return [...this.outbound.entries()].filter(([, l]) => l.refusal !== undefined).map(([name]) => name);
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

  /** TLS for a dial to `peer` offering peer token `which`. */
  private connectTls(tls: PeerTls, peer: PeerInfo, which: number): ConnectTls {
    if (tls.kind === 'psk') return { context: tls.context, psk: tls.keys!.offer(which) };
    return {
      context: tls.context,
      // Not the host: the certificate must name the node we mean to reach (unless peers have their own CA).
      checkServer: (cert) => (tls.check === 'ca' || certificateNames(cert, peer.name) ? undefined : Object.assign(new Error(`its certificate does not name ${peer.name} (DNS:${peer.name} in the SAN)`), { code: 'ERR_PEER_CERT_NAME' })),
    };
  }

  /** With certificates and a peer token: this side's proof for this session ('-' otherwise). */
  private proofFor(stream: Stream, role: ProofRole, which = 0): string | undefined {
    const tls = this.tls;
    if (tls?.kind !== 'certificate' || tls.keys === undefined) return undefined;
    return tls.keys.proof(role, this.exported(stream), which);
  }

  private exported(stream: Stream): Buffer {
    if (stream.exportKeyingMaterial === undefined) throw new PeerProtocolError('this transport cannot bind a proof to the TLS session');
    return stream.exportKeyingMaterial(EXPORTER_BYTES, EXPORTER_LABEL, EXPORTER_CONTEXT);
  }

  private connect(peer: PeerInfo): void {
    if (this.closed) return;
    const link = this.outbound.get(peer.name)!;
    // Every other attempt goes to the alternate address, when the peer has one.
    const address = peer.alternatePeerAddress !== undefined && link.failures % 2 === 1 ? peer.alternatePeerAddress : peer.peerAddress;
    const { host, port } = splitHostPort(address);
    const tls = this.tls;
    const which = link.token;
    const offered = this.speaks[Math.min(link.offer, this.speaks.length - 1)]!;
    /** What this dial learnt: set at most once. */
    let evidence: { reason: LinkRefusal; detail: string } | undefined;
    /** The peer does not speak `offered` and we speak an older version: dial again with it, at once. */
    let olderVersion = false;
    link.connected = false;
    const connectTimer = this.clock.schedule(CONNECT_TIMEOUT_MS, () => {
      if (!link.connected) socket.destroy();
    });
    const socket = this.transport.connect({ host, port, ...(tls === undefined ? {} : { tls: this.connectTls(tls, peer, which) }) }, () => {
      link.connected = true;
      connectTimer.cancel();
      try {
        socket.write(encodeHandshake({ type: 'hello', version: offered, name: this.self.name, cluster: this.clusterId, proof: this.proofFor(socket, 'dialer', which) }));
      } catch (err) {
        this.logger.error({ peer: peer.name, err }, 'cannot start a peer link');
        socket.destroy();
      }
    });
    link.socket = socket;
    link.ready = false;
    link.out = '';
    // An outbound link only ever reads handshake lines.
    const framer = new LineFramer(HANDSHAKE_MAX_LINE);
    const deadline = this.clock.schedule(HANDSHAKE_DEADLINE_MS, () => socket.destroy());
    const refused = (reason: LinkRefusal, detail: string): false => {
      evidence ??= { reason, detail };
      socket.destroy();
      return false;
    };
    socket.on('data', (chunk: Buffer) => {
      const result = framer.push(chunk, (buf, s, e) => {
        // Bytes on a link we only write: not a refusal, just not our protocol. Drop the link.
        if (link.ready) {
          socket.destroy();
          return false;
        }
        let msg: Handshake;
        try {
          msg = decodeHandshake(buf.toString('utf8', s, e), this.speaks);
        } catch (err) {
          return refused('version', (err as Error).message);
        }
        if (msg.type === 'denied' && msg.code === 'version' && link.offer + 1 < this.speaks.length) {
          // It does not speak this version (an older release): no refusal yet, the next older version is offered at once.
          olderVersion = true;
          this.logger.debug({ peer: peer.name, offered, reason: msg.reason.slice(0, 200) }, 'peer does not speak this peer protocol version; offering an older one');
          socket.destroy();
          return false;
        }
        if (msg.type === 'denied') return refused(msg.code === undefined ? 'version' : DENIAL_TO_REFUSAL[msg.code], msg.reason.slice(0, 400));
        if (msg.type !== 'welcome') return refused('version', 'WELCOME or DENIED expected');
        if (msg.version !== offered) return refused('version', `offered peer protocol ${offered}, welcomed at ${msg.version}`);
        // Our peers list has another node's address for this one: never take it for `peer`.
        if (msg.name !== peer.name) return refused('name', `another node answers at ${peer.peerAddress}: ${msg.name.slice(0, 64)}; check --peers`);
        if (tls?.kind === 'certificate' && tls.keys !== undefined && !tls.keys.checkProof('listener', this.exported(socket), msg.proof ?? '')) {
          return refused('peer-token', 'it did not prove the peer token');
        }
        deadline.cancel();
        link.ready = true;
        link.failed = false;
        link.failures = 0;
        link.tlsRefusals = 0;
        link.version = offered;
        if (link.refusal !== undefined) this.logger.info({ peer: peer.name }, 'peer accepts this node again');
        link.refusal = undefined;
        if (link.lastVersion !== offered) {
          const fields = { peer: peer.name, peerProtocol: offered, speaks: this.speaks.join(',') };
          // An older version is worth a line: the peer runs an older release (a rolling upgrade under way).
          if (offered !== this.speaks[0] || link.lastVersion !== undefined) this.logger.info(fields, `peer link up at peer protocol version ${offered}`);
          link.lastVersion = offered;
        }
        this.lastHeard.set(peer.name, this.clock.now());
        this.handler.outboundUp(peer.name, offered);
        return true;
      });
      if (result === 'toolong') refused('version', 'handshake line too long');
    });
    socket.on('drain', () => {
      if (link.socket === socket && link.ready) this.handler.outboundDrained?.(peer.name);
    });
    let nothingListens = false;
    socket.on('error', (err: NodeJS.ErrnoException) => {
      nothingListens = err.code === 'ECONNREFUSED';
      // A TLS refusal comes before the stream is usable (after it, an error is the network's).
      const refusal = link.connected ? undefined : tlsRefusalOf(err, tls?.kind);
      if (refusal !== undefined) evidence ??= { reason: refusal, detail: `TLS: ${err.message.split('\n')[0]!.slice(0, 200)}` };
      this.logger.debug({ peer: peer.name, err }, 'peer link error');
    });
    socket.on('close', () => {
      deadline.cancel();
      connectTimer.cancel();
      const wasReady = link.ready;
      // A dial the peer answered with `DENIED version` is no failure (nor a reason to try the alternate address).
      if (!wasReady && !olderVersion) {
        link.failed = true;
        link.failures++;
      }
      link.ready = false;
      link.version = undefined;
      link.socket = undefined;
      // The next dial offers the next older version after a `DENIED version`, else the newest again (the peer may have been upgraded).
      link.offer = olderVersion ? link.offer + 1 : 0;
      if (wasReady) this.handler.outboundDown(peer.name);
      if (nothingListens) {
        link.refusedAt = this.clock.now();
        link.refusal = undefined;
        this.handler.connectRefused?.(peer.name);
      }
      // Refused with one of two tokens (a rotation under way): the other one is tried at once.
      const tryOtherToken = evidence !== undefined && !this.noteRefusal(peer, link, evidence);
      // A link that was up is re-dialled at once: whether the peer is still there is what we need to know.
      const startOver = link.startOver;
      link.startOver = false;
      const delay = tryOtherToken || olderVersion || startOver
        ? 0
        : link.refusal !== undefined
          ? REFUSED_RETRY_MS
          : wasReady
            ? 0
            : Math.min(RECONNECT_MAX_MS, RECONNECT_MS * 2 ** Math.max(0, link.failures - 1));
      if (!this.closed) {
        link.retry = this.clock.schedule(delay, () => {
          // Redialled where the peer is now, and only while it is one (setPeers).
          const current = this.peers.find((p) => p.name === peer.name);
          if (current !== undefined && this.outbound.get(peer.name) === link) this.connect(current);
        });
      }
    });
  }

  /**
   * Our dial to `peer` was refused: record it (the modes read it), log a
   * change. False when it is not evidence yet: the peer refused one of our
   * two tokens, and the other is still to be tried.
   */
  private noteRefusal(peer: PeerInfo, link: Outbound, evidence: { reason: LinkRefusal; detail: string }): boolean {
    this.events.peerAuthFailures++;
    if (evidence.reason === 'peer-token' && this.tls?.kind === 'psk') {
      // During a rotation the peer may accept only our other token: offer it next time, and call it
      // a refusal only once every token we have was refused.
      const tokens = this.tls.keys!.count;
      link.token = (link.token + 1) % tokens;
      if (++link.tlsRefusals < tokens) return false;
    }
    const previous = link.refusal;
    link.refusal = { reason: evidence.reason, at: this.clock.now(), detail: evidence.detail };
    if (previous?.reason !== evidence.reason) {
      this.logger.error({ peer: peer.name, address: peer.peerAddress, reason: evidence.reason, detail: evidence.detail }, 'peer refused this node');
    }
    this.handler.linkRefused?.(peer.name, link.refusal);
    return true;
  }

  private acceptInbound(socket: Stream): void {
    this.accepted.add(socket);
    socket.on('close', () => this.accepted.delete(socket));
    let peer: string | undefined;
    let version: PeerProtocol = this.speaks[0]!;
    const framer = new LineFramer(HANDSHAKE_MAX_LINE);
    // Transports without an admit hook (in-memory ones) still get a deadline.
    const helloTimer = this.clock.schedule(HANDSHAKE_DEADLINE_MS, () => socket.destroy());
    /** Refused (DENIED on its way, or closed): nothing more it sends is read (nor logged). */
    let refused = false;
    socket.on('error', () => {});
    socket.on('data', (chunk: Buffer) => {
      if (refused) return;
      if (peer !== undefined) this.lastHeard.set(peer, this.clock.now());
      const result = framer.push(chunk, (buf, s, e) => {
        try {
          if (peer === undefined) {
            const hello = this.checkHello(socket, buf.toString('utf8', s, e));
            if (hello === undefined) return false;
            helloTimer.cancel();
            this.pending.authenticated(socket.remoteAddress, socket.remotePort);
            version = hello.version;
            peer = this.welcome(socket, hello.name, version);
            // Authenticated: from here on lines may be as long as the mode's messages.
            framer.maxLineBytes = this.maxLine;
            return true;
          }
          this.handler.message(peer, this.decode(buf, s, e, version));
          return true;
        } catch (err) {
          // Whatever a peer sends costs at most its own link: never an exception past it.
          this.events.badPeerMessages++;
          if (err instanceof PeerValueOutOfRange) {
            const counts = (this.events.peerValuesOutOfRange ??= {});
            counts[err.field] = (counts[err.field] ?? 0) + 1;
          }
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
        if (peer !== undefined) {
          this.events.badPeerMessages++;
          this.logger.warn({ peer, remote: socket.remoteAddress, limit: framer.maxLineBytes }, 'peer line too long; closing the link');
        }
        socket.destroy();
      }
    });
    socket.on('close', () => {
      helloTimer.cancel();
      if (peer !== undefined && this.inbound.get(peer) === socket) {
        this.inbound.delete(peer);
        this.inboundVersions.delete(peer);
        this.handler.inboundDown(peer);
      }
    });
  }

  /**
   * Checks a HELLO, in this order: the protocol version (one we speak), the
   * peer token proof (certificates with a token), the cluster identity, the
   * name, the certificate naming it. Returns the peer's name and the
   * version the link runs at, or undefined once it has been refused. Over TLS the dialer has authenticated already (the
   * handshake proved the peer token or a certificate of the peers' CA), so
   * a refusal is worth a warning; over plain TCP (--insecure-peers) nothing
   * is proved and it is logged at debug only.
   */
  private checkHello(socket: Stream, line: string): { name: string; version: PeerProtocol } | undefined {
    let hello: Handshake;
    try {
      hello = decodeHandshake(line, this.speaks);
    } catch (err) {
      return this.deny(socket, 'version', (err as Error).message);
    }
    if (hello.type !== 'hello') return this.deny(socket, 'version', 'HELLO expected');
    const tls = this.tls;
    if (tls?.kind === 'certificate' && tls.keys !== undefined && !tls.keys.checkProof('dialer', this.exported(socket), hello.proof ?? '')) {
      return this.deny(socket, 'token', 'wrong peer token');
    }
    if (hello.cluster !== this.clusterId) {
      return this.deny(
        socket,
        'cluster',
        `cluster identity mismatch (ours ${this.clusterId}, yours ${hello.cluster.slice(0, 64)}): the nodes were started with different --peers lists (names or order) or --mode; give every node the same`,
      );
    }
    const known = this.peers.find((p) => p.name === hello.name);
    if (known === undefined) return this.deny(socket, 'name', `unknown node name ${hello.name.slice(0, 64)}`);
    if (tls?.kind === 'certificate' && tls.check === 'names' && !certificateNames(streamCertificate(socket), known.name)) {
      return this.deny(socket, 'certificate', `the TLS certificate does not name ${known.name} (DNS:${known.name} in its SAN)`);
    }
    return { name: known.name, version: hello.version };
  }

  private deny(socket: Stream, code: DenialCode, reason: string): undefined {
    this.events.peerAuthFailures++;
    const fields = { remote: socket.remoteAddress, code, reason };
    if (this.tls === undefined) this.logger.debug(fields, 'refused a peer link');
    else this.logger.warn(fields, 'refused a peer link');
    socket.end(encodeHandshake({ type: 'denied', code, reason }));
    return undefined;
  }

  /** The link from `name` is authenticated, at `version`: it replaces any earlier one. */
  private welcome(socket: Stream, name: string, version: PeerProtocol): string {
    const previous = this.inbound.get(name);
    this.inbound.set(name, socket);
    this.inboundVersions.set(name, version);
    previous?.destroy();
    this.lastHeard.set(name, this.clock.now());
    // In the form that version's dialer reads.
    socket.write(encodeHandshake({ type: 'welcome', version, name: this.self.name, proof: this.proofFor(socket, 'listener') }));
    this.handler.inboundUp(name, version);
    this.redialNow(name);
    return name;
  }

  /**
   * The peer just dialled us, so it is up: a link to it that is waiting out a
   * reconnect backoff is dialled now. Otherwise the peer hears nothing from us
   * until the backoff ends (up to RECONNECT_MAX_MS) and may take our silence
   * for our death (priority simulation seed 200794: a restarted standby
   * promoted while the active, still backing off, had not dialled it again).
   * Public: a mode may also ask for it. A dial under way that has not
   * connected yet (its SYN went nowhere while the peer was away or cut off)
   * starts over: it would wait out its deadline, and meanwhile the peer hears
   * nothing from us (priority simulation seeds 1 and 12: a restarted node
   * heard nothing from the active for that long, and promoted beside it).
   */
  redialNow(name: string): void {
    const link = this.outbound.get(name);
    const peer = this.peers.find((p) => p.name === name);
    if (link === undefined || peer === undefined || this.closed) return;
    if (link.socket !== undefined) {
      if (!link.connected) {
        link.failures = 0;
        // At once: an old refusal's 1 s wait is silence the peer takes for our death (a restarted
        // peer whose dial we answered promoted beside us: priority swarm seed 3458650104).
        link.startOver = true;
        link.socket.destroy(); // its close dials again
      }
      return;
    }
    link.retry?.cancel();
    link.retry = undefined;
    link.failures = 0;
    this.connect(peer);
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
    this.pending.closeAll();
    await this.server?.close();
  }
}
