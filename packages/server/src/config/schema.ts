/**
 * The server's configuration: one schema for the YAML file, the flags (same
 * names) and the deployment web page (which reuses it through the generated
 * JSON Schema). Every key has a default and a description; docs/configuration.md
 * documents them all and a test keeps the two in step.
 */
import { z } from 'zod';

// Addresses are checked by regexes, port range included, so that the JSON
// Schema generated from this file (the deployment page validates with it)
// checks them exactly as the server does.
const HOST = String.raw`(\[[0-9a-fA-F:.]+\]|[^\s:[\]]+)`;
/** 1 to 5 digits, at most 65535. */
const PORT = String.raw`(\d{1,4}|[0-5]\d{4}|6[0-4]\d{3}|65[0-4]\d{2}|655[0-2]\d|6553[0-5])`;
const HOST_PORT = new RegExp(`^${HOST}:${PORT}$`);
const HOST_PORT_NOT_0 = `${HOST}:(?!0+$)${PORT}`;
const PEER = new RegExp(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}=${HOST_PORT_NOT_0}$`);

function intInRange(min: number, max: number) {
  return z.preprocess(
    (v) => (typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v),
    z
      .number({ error: `must be an integer from ${min} to ${max}` })
      .int({ error: `must be an integer from ${min} to ${max}` })
      .min(min, { error: `must be an integer from ${min} to ${max}` })
      .max(max, { error: `must be an integer from ${min} to ${max}` }),
  );
}

export function isHostPortString(v: string, allowPortZero: boolean): boolean {
  const m = HOST_PORT.exec(v);
  if (m === null) return false;
  const port = Number(m[2]);
  return port <= 65535 && (allowPortZero || port > 0);
}

/** `off`, or HOST:PORT (port 0 picks a free port): the admin listener's setting. */
const offOrHostPort = () => {
  const error = 'must be HOST:PORT with a port 0..65535 (IPv6 hosts in brackets), or off';
  return z
    .string()
    .regex(new RegExp(`^(?:off|${HOST}:${PORT})$`), { error })
    .refine((v) => v === 'off' || isHostPortString(v, true), { error });
};

const hostPort = (allowPortZero: boolean) => {
  const error = `must be HOST:PORT with a port ${allowPortZero ? '0' : '1'}..65535 (IPv6 hosts in brackets)`;
  return z
    .string()
    .regex(allowPortZero ? HOST_PORT : new RegExp(`^${HOST_PORT_NOT_0}$`), { error })
    .refine((v) => isHostPortString(v, allowPortZero), { error });
};

/** A word that can travel in a protocol field: no spaces or control characters. */
// eslint-disable-next-line no-control-regex
const word = z.string().regex(/^[^\s\x00-\x1f\x7f]{1,200}$/, {
  error: 'must be 1..200 characters without spaces or control characters',
});

const nodeName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, {
  error: 'must be 1..63 letters, digits, ".", "_" or "-", starting with a letter or digit',
});

/** A comma-separated flag or a YAML list. */
function listOf<T extends z.ZodType>(item: T) {
  return z.preprocess(
    (v) => (typeof v === 'string' ? (v === '' ? [] : v.split(',').map((s) => s.trim())) : v),
    z.array(item),
  );
}

/** A named client identity: its token (or a file holding it) and the key prefixes it may use. */
const clientIdentity = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, { error: 'must be 1..63 letters, digits, ".", "_" or "-", starting with a letter or digit' }),
    token: word.optional(),
    'token-file': z.string().min(1).optional(),
    keys: z.array(z.string().max(250)).optional(),
  })
  .strict();

const peer = z.string().regex(PEER, { error: 'each peer must be NAME=HOST:PORT with a port 1..65535' });

const boolFlag = z.preprocess((v) => (v === 'true' ? true : v === 'false' ? false : v), z.boolean({ error: 'must be true or false' }));

export const configSchema = z
  .object({
    listen: hostPort(true).default('127.0.0.1:5225').describe('Client listener, HOST:PORT (port 0 picks a free port).'),
    'data-dir': z
      .string()
      .min(1)
      .default('./ticketing-data')
      .describe('Directory for what must survive a restart (token high-water mark). Created on first start.'),
    memory: boolFlag.default(false).describe('Keep nothing on disk; tokens start at the current Unix time in microseconds times 256.'),
    node: nodeName.optional().describe("This node's name (in a cluster, one of the peers' names). Default: the host name."),
    peers: listOf(peer)
      .default([])
      .describe('The cluster, NAME=HOST:PORT in priority order (first = highest). HOST:PORT is the client address.'),
    mode: z.enum(['priority', 'raft'], { error: 'must be priority or raft' }).default('priority').describe('Cluster replication mode.'),
    'peer-listen': hostPort(false)
      .optional()
      .describe("Peer-to-peer listener of a cluster node, HOST:PORT. Default: the listen host and the client port + 1 (each peer's peer port is its client port + 1)."),
    'heartbeat-interval': intInRange(10, 10_000).default(100).describe('Milliseconds between heartbeats to each peer.'),
    'raft-join': boolFlag
      .default(false)
      .describe('Raft mode: this node replaces a lost member of a running cluster; it does not vote until it has heard from the leader.'),
    'raft-snapshot-entries': intInRange(10, 100_000_000)
      .default(200_000)
      .describe('Raft mode: log entries applied between snapshots (each snapshot compacts the log).'),
    'failover-timeout': intInRange(50, 60_000)
      .default(500)
      .describe('Milliseconds without a heartbeat after which a peer counts as down (a standby then promotes).'),
    'sync-standbys': intInRange(0, 15)
      .default(0)
      .describe('Priority mode: hold each reply until this many standbys have acknowledged its replication (0: asynchronous). At most the number of standbys minus one, unless sync-standbys-allow-stall.'),
    'sync-standbys-allow-stall': boolFlag
      .default(false)
      .describe('Priority mode: accept sync-standbys equal to the number of standbys, so that one standby failure stops every reply until it is back.'),
    'client-tokens': listOf(z.union([word, clientIdentity]))
      .default([])
      .describe(
        'Secrets accepted in H; when set, H with one of them is required first. A bare token may use every key; an entry {name, token or token-file, keys: [prefixes]} is a named identity: only keys with one of its prefixes (keys is required; [\'\'] for every key), and only it releases what it acquired.',
      ),
    'client-tokens-file': z.string().min(1).optional().describe('File of bare client tokens, one per line (# comments and blank lines skipped), added to client-tokens. Re-read on SIGHUP.'),
    'peer-token': word
      .optional()
      .describe('Shared secret between cluster nodes, at least 128 bits (openssl rand -hex 32): peer links run TLS keyed by it (it never crosses the wire).'),
    'peer-token-file': z.string().min(1).optional().describe('File holding peer-token (keeps it out of the command line).'),
    'peer-token-next': word
      .optional()
      .describe('A second peer token this node also accepts, and dials with when a peer refuses peer-token: for rotating the peer token without a gap.'),
    'peer-token-next-file': z.string().min(1).optional().describe('File holding peer-token-next.'),
    'insecure-peers': boolFlag
      .default(false)
      .describe('Allow a cluster whose peer links have neither a peer token nor TLS, on loopback addresses only (tests); without it such a cluster refuses to start.'),
    'tls-cert': z.string().min(1).optional().describe('PEM certificate: serve TLS on the client listener (and to peers).'),
    'tls-key': z.string().min(1).optional().describe('PEM private key for tls-cert.'),
    'tls-ca': z.string().min(1).optional().describe('PEM CA bundle to verify peers (and client certificates when required).'),
    'tls-peer-ca': z
      .string()
      .min(1)
      .optional()
      .describe("PEM CA bundle of the peers' own certificates. Without it peers are verified against tls-ca and each peer's certificate must name it (node name or host in its SAN)."),
    'tls-require-client-cert': boolFlag.default(false).describe('Require client certificates on the client listener, verified against tls-ca.'),
    'tls-handshake-timeout': intInRange(100, 120_000).default(10_000).describe('Milliseconds a TLS handshake may take before the connection is dropped.'),
    'idle-timeout': intInRange(1_000, 86_400_000)
      .default(60_000)
      .describe('Milliseconds a connection with no waiting acquire may send nothing before it is closed (clients ping every 5 s).'),
    'hello-timeout': intInRange(100, 600_000)
      .default(5_000)
      .describe('Milliseconds a connection may take to send H with its client token, when client-tokens are set (unauthenticated connections must not hold slots).'),
    'line-timeout': intInRange(100, 600_000).default(10_000).describe('Milliseconds a started line may take to be completed (slow senders are cut).'),
    http: offOrHostPort()
      .optional()
      .describe(
        'Admin HTTP listener (metrics, status, web pages), HOST:PORT, or off. Default: 127.0.0.1 and the client port + 4000 (9225 for 5225), skipped with a warning when that port is taken.',
      ),
    'http-hosts': listOf(z.string().regex(/^[A-Za-z0-9.-]{1,253}$/, { error: 'must be host names (letters, digits, "." and "-")' }))
      .default([])
      .describe('Host names the admin listener answers besides IP addresses and localhost (requests naming any other Host get 421: DNS rebinding).'),
    'http-tls': boolFlag.default(false).describe('Serve the admin listener over HTTPS with tls-cert and tls-key.'),
    'http-token': word.optional().describe('Secret the admin HTTP listener requires on everything but /healthz and /readyz (Authorization: Bearer). Open when unset.'),
    'http-token-file': z.string().min(1).optional().describe('File holding http-token (keeps it out of the command line).'),
    'max-locks': intInRange(1, 100_000_000).default(1_000_000).describe('Most keys held at once; B beyond it.'),
    'max-waiters-per-key': intInRange(1, 10_000_000).default(10_000).describe('Most waiting acquires on one key; B beyond it.'),
    'max-waiters': intInRange(1, 100_000_000).default(1_000_000).describe('Most waiting acquires in all; B beyond it.'),
    'max-pending-per-conn': intInRange(1, 1_000_000)
      .default(1_024)
      .describe('Most unanswered acquires per connection: B beyond it, E unavailable at twice it.'),
    'max-conns': intInRange(1, 1_000_000)
      .default(10_000)
      .describe('Most client connections, TLS handshakes and connections before H included; E unavailable beyond it.'),
    'max-conns-per-address': intInRange(1, 1_000_000)
      .default(1_024)
      .describe('Most client connections from one source address (TLS handshakes and connections before H included); E unavailable beyond it.'),
    'token-reserve': intInRange(1_000, 1_000_000_000)
      .default(1_000_000)
      .describe('Tokens reserved ahead per write of the token high-water mark (one fsync per this many grants).'),
    'log-level': z.enum(['debug', 'info', 'warn', 'error'], { error: 'must be debug, info, warn or error' }).default('info').describe('Least severe log level written to stderr. Re-read on SIGHUP.'),
    'log-format': z
      .enum(['json', 'text'], { error: 'must be json or text' })
      .optional()
      .describe('Log lines on stderr: json (one object per line) or text. Default: text on a terminal, json otherwise.'),
    'cluster-name': z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, { error: 'must be 1..63 letters, digits, ".", "_" or "-", starting with a letter or digit' })
      .default('ticketing')
      .describe('Name of the cluster this node belongs to, for monitoring: the cluster label of ticketing_info (alerts and dashboards group by it).'),
  })
  .strict();

export type Config = z.infer<typeof configSchema>;
export type ConfigKey = keyof Config;
export const CONFIG_KEYS = Object.keys(configSchema.shape) as ConfigKey[];
