/**
 * Opening a byte stream to one address: plain TCP or TLS. The rest of the
 * client only sees a `Socket` and one "connected" event.
 */
import { readFileSync } from 'node:fs';
import { isIP, connect as netConnect } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { InvalidArgumentError } from './errors.js';
import { splitAddress, type TlsOption } from './options.js';

/** The part of node:net's Socket the client uses. */
export interface ClientSocket {
  readonly destroyed: boolean;
  readonly writable: boolean;
  /** Bytes queued in the socket, not yet handed to the kernel (node:net has it; a simulated socket may not). */
  readonly writableLength?: number;
  /** Set at once when a write failed (node:net has it; a simulated socket may not). */
  readonly errored?: Error | null;
  write(data: string): boolean;
  end(): unknown;
  destroy(): unknown;
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
  on(event: 'end' | 'close', listener: () => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
}

export interface Transport {
  /** Starts connecting; `onConnected` runs once the stream is ready for bytes (after the TLS handshake). */
  open(address: string, onConnected: () => void): ClientSocket;
}

let override: Transport | undefined;

/** Every broker made from now on connects through `t` (undefined: TCP/TLS again). For the simulator only. */
export function useTransport(t: Transport | undefined): void {
  override = t;
}

export function makeTransport(tls: TlsOption): Transport {
  if (override !== undefined) return override;
  if (tls === 'off') {
    return {
      open(address, onConnected) {
        const { host, port } = splitAddress(address);
        const socket = netConnect({ host, port, allowHalfOpen: true, noDelay: true });
        socket.once('connect', onConnected);
        return socket;
      },
    };
  }
  const base = tlsOptions(tls);
  return {
    open(address, onConnected) {
      const { host, port } = splitAddress(address);
      // SNI takes names only; an IP address is still checked against the certificate's IP SANs.
      // allowHalfOpen is passed on to the TLSSocket (Node's types omit it): we half-close on abort.
      const options = { ...base, host, port, allowHalfOpen: true, ...(isIP(host) === 0 ? { servername: host } : {}) };
      const socket = tlsConnect(options as ConnectionOptions);
      socket.setNoDelay(true);
      socket.once('secureConnect', onConnected);
      return socket;
    },
  };
}

function tlsOptions(tls: Exclude<TlsOption, 'off'>): ConnectionOptions {
  if (tls === 'system') return {};
  if (tls === 'insecure') {
    process.emitWarning('Ticketing client: tls "insecure" does not verify the server certificate; use it in tests only', {
      code: 'TICKETING_TLS_INSECURE',
    });
    return { rejectUnauthorized: false };
  }
  if (tls.ca.includes('-----BEGIN')) return { ca: tls.ca };
  try {
    return { ca: readFileSync(tls.ca, 'utf8') };
  } catch (err) {
    throw new InvalidArgumentError(`cannot read the TLS CA file ${tls.ca}: ${(err as Error).message}`, { cause: err });
  }
}
