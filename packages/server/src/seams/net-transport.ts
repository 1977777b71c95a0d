/** The real transport: TCP (node:net) or TLS (node:tls), no Nagle delay, half-open streams allowed. */
import { createServer, connect as tcpConnect, type AddressInfo, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer, connect as tlsConnect, type PeerCertificate, type SecureContextOptions, type TLSSocket } from 'node:tls';
import type { ListenOptions, Listener, Stream, Transport } from './transport.js';

function isIp(host: string): boolean {
  return /^[0-9.]+$/.test(host) || host.includes(':');
}

class NetListener implements Listener {
  constructor(private readonly server: Server) {}

  address(): { address: string; port: number } {
    return this.server.address() as AddressInfo;
  }

  updateTls(context: SecureContextOptions): void {
    (this.server as ReturnType<typeof createTlsServer>).setSecureContext(context);
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

export const netTransport: Transport = {
  async listen(options: ListenOptions, onStream: (stream: Stream) => void): Promise<Listener> {
    const tls = options.tls;
    const admit = options.admit;
    /** Counts the connection (admit) first: a refused one is closed before anything reads it. */
    const admitted = (socket: Socket): boolean => {
      if (admit === undefined) return true;
      const release = admit(socket.remoteAddress, { remoteAddress: socket.remoteAddress, remotePort: socket.remotePort, close: () => socket.destroy(), spoke: () => socket.bytesRead > 0 });
      if (release === undefined) {
        socket.destroy();
        return false;
      }
      socket.once('close', release);
      return true;
    };
    // allowHalfOpen: a client's FIN must not close our side before our last replies are written.
    let server: Server;
    if (tls === undefined) {
      server = createServer({ allowHalfOpen: true, noDelay: true }, (socket: Socket) => {
        if (admitted(socket)) onStream(socket);
      });
    } else {
      server = createTlsServer(
        {
          ...tls.context,
          allowHalfOpen: true,
          noDelay: true,
          requestCert: tls.requestCert,
          rejectUnauthorized: tls.requestCert,
          ...(tls.handshakeTimeoutMs === undefined ? {} : { handshakeTimeout: tls.handshakeTimeoutMs }),
          ...(tls.psk === undefined ? {} : { pskCallback: (_socket: TLSSocket, identity: string) => tls.psk!(identity) ?? null }),
        },
        (socket: TLSSocket) => onStream(socket),
      );
      // The raw TCP connection, before its handshake: counted from here.
      server.prependListener('connection', (raw: Socket) => void admitted(raw));
      // With a listener for it, Node leaves a failed (or timed-out) handshake's socket open: close it.
      server.on('tlsClientError', (err: Error, socket: TLSSocket) => {
        tls.onHandshakeError?.(err, socket.remoteAddress);
        socket.destroy();
      });
    }
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: options.host, port: options.port, ...(options.backlog === undefined ? {} : { backlog: options.backlog }) }, () => {
        server.off('error', reject);
        resolve();
      });
    });
    // Every listening server keeps an 'error' listener: an accept that fails (EMFILE) must not stop the process.
    server.on('error', (err: Error) => options.onError?.(err));
    return new NetListener(server);
  },

  connect(options, onConnect): Stream {
    const { host, port, tls } = options;
    const psk = tls?.psk;
    const checkServer = tls?.checkServer;
    const socket =
      tls === undefined
        ? tcpConnect({ host, port })
        : tlsConnect({
            host,
            port,
            ...tls.context,
            servername: isIp(host) ? undefined : host,
            ...(psk === undefined ? {} : { pskCallback: () => ({ psk: psk.key, identity: psk.identity }) }),
            ...(checkServer === undefined ? {} : { checkServerIdentity: (_host: string, cert: PeerCertificate) => checkServer(cert) }),
          });
    socket.setNoDelay(true);
    socket.once(tls === undefined ? 'connect' : 'secureConnect', onConnect);
    return socket;
  },
};
