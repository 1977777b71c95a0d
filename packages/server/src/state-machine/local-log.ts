/** The command log of a single node: commands are applied to the lock table at once. */
import type { CommandLog } from './command-log.js';
import type { Command, LockRecord, Result } from './commands.js';
import type { LockTable } from './lock-table.js';

export class LocalLog<R extends LockRecord> implements CommandLog<R> {
  constructor(readonly table: LockTable<R>) {}

  apply(command: Command): Result<R> {
    return this.table.apply(command);
  }
}
