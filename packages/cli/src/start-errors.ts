/**
 * Why `ticketing server` could not start, as one line an operator can act
 * on: which listener or directory, why, and what to do. System errors
 * arrive as errno codes (`EADDRINUSE`, `EROFS`, `ENOENT ... mkdir`); this
 * says what they mean here.
 */
import { ADMIN_PORT_OFFSET, ConfigError, type ServerConfig } from '@ticketing/server';

type Errno = NodeJS.ErrnoException & { address?: string; port?: number };

/** Which listener a port belongs to, and the flag that sets it. */
function listenerOf(port: number | undefined, config: ServerConfig): { name: string; flag: string } {
  const portOf = (a: string | undefined) => (a === undefined ? undefined : Number(a.slice(a.lastIndexOf(':') + 1)));
  const client = portOf(config.listen);
  if (port !== undefined && port === client) return { name: 'client listener', flag: '--listen' };
  const admin = config.http === undefined ? (client === undefined ? undefined : client + ADMIN_PORT_OFFSET) : portOf(config.http);
  if (port !== undefined && port === admin) return { name: 'admin listener', flag: '--http' };
  const peer = config['peer-listen'] === undefined ? (client === undefined ? undefined : client + 1) : portOf(config['peer-listen']);
  if (port !== undefined && port === peer) return { name: 'peer listener', flag: '--peer-listen' };
  return { name: 'listener', flag: '--listen' };
}

const LISTEN_WHY: Record<string, string> = {
  EADDRINUSE: 'the address is in use (another Ticketing node, or another program, listens there); stop it or choose another address with',
  EACCES: 'permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE); choose a port from 1024 up with',
  EADDRNOTAVAIL: 'this host has no such address; give one of its addresses (or 0.0.0.0) with',
};

const FILE_WHY: Record<string, string> = {
  EROFS: 'the file system is read-only',
  EACCES: `permission denied for this user (uid ${process.getuid?.() ?? '?'}): make the directory writable by it (chown), or run as its owner`,
  EPERM: 'the operation is not permitted there',
  ENOENT: 'a directory on the way does not exist: create its parent first',
  ENOTDIR: 'a part of the path is a file, not a directory',
  ENOSPC: 'no space left on the device',
  EDQUOT: 'the disk quota is exhausted',
  EISDIR: 'a directory is where a file should be',
};

/** One line for an error that stopped the start. */
export function describeStartError(err: unknown, config: ServerConfig | undefined): string {
  if (err instanceof ConfigError) return err.message;
  const e = err as Errno;
  if (e.syscall === 'listen' || e.syscall === 'bind') {
    const why = e.code === undefined ? undefined : LISTEN_WHY[e.code];
    if (why !== undefined && config !== undefined) {
      const { name, flag } = listenerOf(e.port, config);
      const address = e.address === undefined ? '' : `${e.address.includes(':') ? `[${e.address}]` : e.address}:${e.port}`;
      return `cannot start the ${name} on ${address}: ${why} ${flag} (${e.code})`;
    }
  }
  if (e.path !== undefined && e.code !== undefined && FILE_WHY[e.code] !== undefined) {
    const dir = config?.['data-dir'];
    const where = dir === undefined ? e.path : `data directory ${dir}${e.path === dir ? '' : ` (${e.syscall ?? 'using'} ${e.path})`}`;
    return `cannot use the ${where}: ${FILE_WHY[e.code]}; or give another --data-dir (${e.code})`;
  }
  return `cannot start: ${(err as Error).message}`;
}
