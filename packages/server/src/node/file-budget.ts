/**
 * Does the open-file limit leave room for what the configuration allows?
 * Every client connection (handshakes and connections before `H` included),
 * every peer link, every admin connection and the data files each take a
 * file descriptor; a process that runs out fails accepts (EMFILE) and,
 * worse, WAL and snapshot writes. Node raises its soft limit to the hard
 * limit when it starts, so the limit read here is the most this process can
 * get: when the configuration needs more, the operator must raise it
 * (`ulimit -n`, systemd `LimitNOFILE=`) or lower `max-conns`.
 */
import type { ServerConfig } from '../config/load.js';
import { MAX_ADMIN_CONNECTIONS } from '../http/admin-server.js';

/** Descriptors for everything else: stdio, the WAL and snapshot files, the event loop, DNS, a margin. */
const RESERVED = 64;
/** Peer connections beyond the links themselves (handshakes in progress, reconnects). */
const PEER_EXTRA = 16;

/** About how many file descriptors `config` may need at most. */
export function filesNeeded(config: ServerConfig): number {
  const peers = Math.max(0, config.peers.length - 1);
  const admin = config.http === 'off' ? 0 : MAX_ADMIN_CONNECTIONS + 1;
  // Per peer: our outbound link, its inbound link, and its listener share; plus the listeners themselves.
  return config['max-conns'] + 1 + (peers > 0 ? 1 + 2 * peers + PEER_EXTRA + 2 * peers : 0) + admin + RESERVED;
}

/** The soft "Max open files" limit in a /proc/<pid>/limits text, if there is one. */
export function parseOpenFileLimit(limitsText: string): number | undefined {
  const m = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/m.exec(limitsText);
  if (m === null) return undefined;
  return m[1] === 'unlimited' ? Number.POSITIVE_INFINITY : Number(m[1]);
}

/** A warning when `limit` is below what `config` may need, else undefined. */
export function fileLimitWarning(config: ServerConfig, limit: number | undefined): { needed: number; limit: number; message: string } | undefined {
  if (limit === undefined) return undefined;
  const needed = filesNeeded(config);
  if (needed <= limit) return undefined;
  return {
    needed,
    limit,
    message:
      `max-conns ${config['max-conns']} with the peer links and the admin listener may need about ${needed} file descriptors, but this process may open only ${limit} ` +
      '(its hard limit): raise it (ulimit -n, or LimitNOFILE= under systemd) or lower max-conns; past it new connections are refused for a moment at a time',
  };
}
