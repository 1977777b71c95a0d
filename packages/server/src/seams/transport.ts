/**
 * Byte streams between this node and its clients and peers, injected: the
 * client listener and the peer links use only this, so a simulation can run
 * whole nodes over an in-memory network. The real one is net-transport.ts
 * (node:net, node:tls).
 */
import type { PeerCertificate, SecureContextOptions } from 'node:tls';

/** What a stream tells its user, as node:net's Socket does. */
export interface StreamEvents {
  /** Bytes arrived. */
  data: (chunk: Buffer) => void;
  /** The other side ended its half (FIN); writing may go on (listeners allow half-open streams). */
  end: () => void;
  /** The stream is gone; always the last event. */
  close: () => void;
  /** A failure; 'close' follows. */
  error: (err: Error) => void;
  /** What `write` buffered has been sent: writing may go on (back-pressure). */
  drain: () => void;
}

/** A connected, ordered, reliable byte stream (a socket). */
export interface Stream {
  readonly remoteAddress: string | undefined;
  readonly remotePort: number | undefined;
  /** Bytes written but not yet sent. */
  readonly writableLength: number;
  /** Queues `data`; false when the buffer is full (wait for 'drain'). */
  write(data: string | Uint8Array): boolean;
  /** Ends this half of the stream (after what was written). */
  end(): void;
  /** Writes `data`, then ends this half of the stream. */
  end(data: string): void;
  /** Closes at once; unsent data is dropped. */
  destroy(): void;
  /** Closes at once with a TCP reset (RST), so the peer sees a broken connection, not a clean close. */
  resetAndDestroy(): void;
  /** Stops or resumes 'data' events (the unread bytes wait, and the peer sees back-pressure). */
  pause(): void;
  resume(): void;
  on<E extends keyof StreamEvents>(event: E, listener: StreamEvents[E]): unknown;
  /** TLS streams: keying material bound to this session (RFC 5705), to tie a proof to this very link. */
  exportKeyingMaterial?(length: number, label: string, context: Buffer): Buffer;
}

/**
 * TLS-PSK (pre-shared keys instead of certificates): the listener finds the
 * key for the identity a dialer offers (undefined: unknown, the handshake
 * fails); the dialer offers one identity and its key.
 */
export type PskLookup = (identity: string) => Buffer | undefined;
export interface PskOffer {
  readonly identity: string;
  readonly key: Buffer;
}

/** TLS for a listener: the server's certificate, and whether clients must present theirs. */
export interface ListenTls {
  readonly context: SecureContextOptions;
  readonly requestCert: boolean;
  readonly handshakeTimeoutMs?: number;
  /** A client's handshake failed (its stream was closed). */
  readonly onHandshakeError?: (err: Error, remote: string | undefined) => void;
  /** Authenticate dialers by pre-shared key (no certificate is needed then). */
  readonly psk?: PskLookup;
}

/** One accepted connection, as the admit hook sees it before anything is read from it. */
export interface AcceptedConnection {
  readonly remoteAddress: string | undefined;
  readonly remotePort: number | undefined;
  /** Closes it at once (e.g. to make room under a flood). */
  close(): void;
  /**
   * It has sent something (a TLS ClientHello, a HELLO line): a handshake
   * under way, not an idle socket. Undefined: the transport cannot tell.
   */
  spoke?(): boolean;
}

export interface ListenOptions {
  readonly host: string;
  readonly port: number;
  readonly backlog?: number;
  readonly tls?: ListenTls;
  /**
   * Called for every accepted connection as soon as it exists (before a TLS
   * handshake): returns what to call when it closes, or undefined to close it
   * at once. So connections still in their TLS handshake count too.
   */
  readonly admit?: (remoteAddress: string | undefined, connection: AcceptedConnection) => (() => void) | undefined;
  /**
   * A failure of the listening socket itself after it started (EMFILE on
   * accept: out of file descriptors). The listener keeps listening; without
   * this, such an error would stop the process.
   */
  readonly onError?: (err: Error) => void;
}

export interface Listener {
  /** Where it listens (the real port when 0 was asked). */
  address(): { address: string; port: number };
  /** New certificates for streams accepted from now on (TLS listeners). */
  updateTls(context: SecureContextOptions): void;
  /** Stops accepting; resolves when every accepted stream has closed. */
  close(): Promise<void>;
}

/** TLS for an outgoing stream. */
export interface ConnectTls {
  readonly context: SecureContextOptions;
  /** Authenticate with this pre-shared key instead of certificates. */
  readonly psk?: PskOffer;
  /**
   * Checks the server's (CA-verified) certificate; an Error refuses it.
   * Default: the certificate must name `host` (unless it is an IP address).
   */
  readonly checkServer?: (certificate: PeerCertificate) => Error | undefined;
}

export interface ConnectOptions {
  readonly host: string;
  readonly port: number;
  readonly tls?: ConnectTls;
}

export interface Transport {
  /** Listens; `onStream` gets each accepted stream (TLS: once its handshake is done). */
  listen(options: ListenOptions, onStream: (stream: Stream) => void): Promise<Listener>;
  /** Connects; `onConnect` is called once the stream is usable (TLS: after the handshake). Failures arrive as 'error' then 'close'. */
  connect(options: ConnectOptions, onConnect: () => void): Stream;
}
