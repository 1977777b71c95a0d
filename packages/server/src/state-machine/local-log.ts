/**
 * The command log of a single node: commands are applied to the lock table
 * at once. Cluster modes put their replication behind the same interface.
 */
import type { CommandLog } from '../engine/lock-engine.js';
import type { Command, Result } from './commands.js';
import type { LockTable } from './lock-table.js';

export class LocalLog implements CommandLog {
  constructor(readonly table: LockTable) {}

  apply(command: Command): Result {
    return this.table.apply(command);
  }
}
