/**
 * Where the admin listener goes. It is on by default so that a newcomer's
 * `ticketing status` and dashboard work without flags: on loopback (nothing
 * leaves the machine without an explicit `--http`) at the client port + 4000,
 * so the default server's is 127.0.0.1:9225 and several nodes on one machine
 * (5225, 5227, ...) do not collide. A default that cannot bind is skipped with
 * a warning (the lock service matters more than its dashboard); an explicit
 * `--http` that cannot bind stops the start, as any other bad setting does.
 */
import type { Logger } from 'pino';
import type { ServerConfig } from '../config/load.js';
import { isLoopbackHost, joinHostPort, splitHostPort } from '../net/address.js';
import type { NodeView } from '../node/node-view.js';
import { AdminServer } from './admin-server.js';
import { ConfigError } from '../errors.js';
import { loadTls } from '../net/tls-config.js';

/** The default admin port is the client port plus this. */
export const ADMIN_PORT_OFFSET = 4000;

export type AdminPlan =
  | { readonly address: undefined; readonly why: string }
  | { readonly address: string; readonly explicit: boolean };

/** The admin address `config` asks for, or why there is none. */
export function adminPlan(config: Pick<ServerConfig, 'http' | 'listen'>): AdminPlan {
  if (config.http === 'off') return { address: undefined, why: 'http is off' };
  if (config.http !== undefined) return { address: config.http, explicit: true };
  const { port } = splitHostPort(config.listen);
  // A node on a free port (tests, tools) gets a free admin port too.
  if (port === 0) return { address: '127.0.0.1:0', explicit: false };
  if (port + ADMIN_PORT_OFFSET > 65_535) {
    return { address: undefined, why: `the client port + ${ADMIN_PORT_OFFSET} is above 65535; set --http to have an admin listener` };
  }
  return { address: joinHostPort('127.0.0.1', port + ADMIN_PORT_OFFSET), explicit: false };
}


/** Starts the admin listener `config` asks for; undefined when it is off or its default address is taken. */
export async function startAdminListener(node: NodeView, config: ServerConfig, logger: Logger): Promise<AdminServer | undefined> {
  const plan = adminPlan(config);
  if (plan.address === undefined) {
    if (config.http !== 'off') logger.warn({ why: plan.why }, 'no admin listener');
    return undefined;
  }
  const token = config['http-token'];
  if (plan.explicit && token === undefined && !isLoopbackHost(splitHostPort(plan.address).host)) {
    logger.warn({ http: plan.address }, 'admin listener off loopback without http-token: anyone who reaches it can read status and metrics');
  }
  try {
    const tls = config['http-tls'] ? loadTls(config) : undefined;
    if (config['http-tls'] && tls === undefined) throw new ConfigError('invalid http-tls: serving the admin listener over TLS needs tls-cert and tls-key');
    return await AdminServer.start(node, plan.address, token, logger, { hosts: config['http-hosts'], ...(tls === undefined ? {} : { tls: tls.context }) });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (plan.explicit || (code !== 'EADDRINUSE' && code !== 'EACCES' && code !== 'EADDRNOTAVAIL')) throw err;
    logger.warn(
      { http: plan.address, err: (err as Error).message },
      'default admin listener address is taken: running without an admin listener (set --http HOST:PORT, or --http off to silence this)',
    );
    return undefined;
  }
}
