/**
 * @ticketing/server: one Ticketing node (single, priority cluster or Raft),
 * its admin HTTP listener, and the configuration it starts from. This is the
 * package's only entry: the CLI (`@ticketing/cli`) and the black-box tests
 * import these names and nothing below `src/`.
 *
 * It depends on the protocol codec and the web assets, never on the client
 * or the checker (those belong to the CLI's `lock` and `verify`).
 */
export { TicketingNode, type NodeDeps } from './node/ticketing-node.js';
// The seams a node runs on (the real ones are the defaults): a simulation passes its own.
export { ManualClock, type Clock, type TimerHandle } from './seams/clock.js';
export type { Transport, Listener, ListenOptions, ListenTls, ConnectOptions, ConnectTls, AcceptedConnection, Stream, StreamEvents } from './seams/transport.js';
// What a TLS handshake would decide, for transports without real TLS (the simulator's network).
export { modelTlsHandshake, type ModelledFailure } from './seams/tls-model.js';
export type { Disk, DiskFile, DiskFileSync, OpenMode } from './seams/disk.js';
export { NO_PROBES, type Environment, type Probes } from './seams/environment.js';
export { realEnvironment } from './seams/real-environment.js';
export { SERVER_ERROR_CODES, ServerError, type ServerErrorCode } from './errors.js';
// What a Raft node's disk holds (read-only), for the simulator's durability check.
export { RaftStorage, type Recovery as RaftRecovery } from './raft/raft-storage.js';
// How priority nodes order tables and read tokens as times, for the simulator's checks (one rule, not a copy).
export { dominates, type Claim } from './cluster/role-machine.js';
export { tokenWallMs } from './storage/token-reservation.js';
export type { MemberStatus, MembershipControl, MembershipRequest, MembershipView, NodeRole, NodeStatus, PeerStatus, RaftLogView, RaftStatus } from './node/node-view.js';
export { MembershipRefused } from './errors.js';
export { AdminServer } from './http/admin-server.js';
export { startAdminListener, adminPlan, ADMIN_PORT_OFFSET } from './http/admin-address.js';
export { ConfigError, loadConfig, validateConfig, readConfigFile, defaultNodeName, type ServerConfig } from './config/load.js';
export { CONFIG_KEYS, configSchema, type Config, type ConfigKey } from './config/schema.js';
export { configKeyHelp } from './config/describe.js';
export { startWarnings, type StartWarning } from './config/start-warnings.js';
export { VERSION } from './version.js';
export { fileLimitWarning, filesNeeded, parseOpenFileLimit } from './node/file-budget.js';
export { BACKUP_VERSION, backupOfDataDir, encodeBackup, parseBackup, restoreBackup, type Backup } from './storage/backup.js';
export { replaceFileDurablySync } from './storage/durable-dir.js';
