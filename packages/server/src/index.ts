/**
 * @ticketing/server: one Ticketing node (single, priority cluster or Raft),
 * its admin HTTP listener, and the configuration it starts from. This is the
 * package's only entry: the CLI (`@ticketing/cli`) and the black-box tests
 * import these names and nothing below `src/`.
 *
 * It depends on the protocol codec and the web assets, never on the client
 * or the checker (those belong to the CLI's `lock` and `verify`).
 */
export { TicketingNode } from './node/ticketing-node.js';
export type { NodeRole, NodeStatus, PeerStatus, RaftStatus } from './node/node-view.js';
export { AdminServer } from './http/admin-server.js';
export { startAdminListener, adminPlan, ADMIN_PORT_OFFSET } from './http/admin-address.js';
export { ConfigError, loadConfig, validateConfig, readConfigFile, defaultNodeName, type ServerConfig } from './config/load.js';
export { CONFIG_KEYS, configSchema, type Config, type ConfigKey } from './config/schema.js';
export { VERSION } from './version.js';
