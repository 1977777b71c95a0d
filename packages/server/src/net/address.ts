/** `HOST:PORT` strings, IPv6 hosts in brackets. */

export function splitHostPort(address: string): { host: string; port: number } {
  const colon = address.lastIndexOf(':');
  let host = address.slice(0, colon);
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  return { host, port: Number(address.slice(colon + 1)) };
}

export function joinHostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** Loopback: 127.0.0.0/8, ::1, localhost (nothing off this machine reaches it). */
export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}
