/**
 * What a TLS handshake between a listener's and a dialer's settings would
 * decide, for transports that carry no real TLS (the in-memory test network
 * and the simulator): both plain, or matching pre-shared keys, connect; a
 * wrong or unknown key fails the dialer with the alert real TLS would send;
 * TLS against plain fails as it does on a real network. Certificates are not
 * modelled (they pass). So a simulated cluster with two different peer
 * tokens behaves like a real one: the links are refused in the handshake.
 */
import type { ConnectTls, ListenTls } from './transport.js';

/** How the dialer sees a failed handshake. */
export type ModelledFailure = { readonly kind: 'error'; readonly error: Error } | { readonly kind: 'closed' };

function tlsError(code: string, message: string): ModelledFailure {
  return { kind: 'error', error: Object.assign(new Error(message), { code }) };
}

/** Undefined: the stream connects. */
export function modelTlsHandshake(listen: ListenTls | undefined, connect: ConnectTls | undefined): ModelledFailure | undefined {
  if (listen === undefined && connect === undefined) return undefined;
  // A TLS ClientHello sent to a plain listener: its answer (if any) is not TLS.
  if (listen === undefined) return tlsError('ERR_SSL_WRONG_VERSION_NUMBER', 'wrong version number (the listener does not speak TLS)');
  // Plain bytes sent to a TLS listener: it drops the connection.
  if (connect === undefined) return { kind: 'closed' };
  if (listen.psk === undefined && connect.psk === undefined) return undefined;
  if (listen.psk === undefined || connect.psk === undefined) return tlsError('ERR_SSL_SSL/TLS_ALERT_HANDSHAKE_FAILURE', 'ssl/tls alert handshake failure');
  const key = listen.psk(connect.psk.identity);
  if (key === undefined) return tlsError('ERR_SSL_SSL/TLS_ALERT_HANDSHAKE_FAILURE', 'ssl/tls alert handshake failure (unknown PSK identity)');
  if (!key.equals(connect.psk.key)) return tlsError('ERR_SSL_TLSV1_ALERT_DECRYPT_ERROR', 'tlsv1 alert decrypt error (another pre-shared key)');
  return undefined;
}
