/**
 * Where lock-state commands go. A single node applies them to its table at
 * once (LocalLog); the cluster modes put their replication behind the same
 * interface, so the engine never knows which one it drives.
 */
import type { Command, LockRecord, Result } from './commands.js';
import type { LockTable } from './lock-table.js';

export interface CommandLog<R extends LockRecord = LockRecord> {
  readonly table: LockTable<R>;
  apply(command: Command): Result<R>;
}
