/** The `ticketing` command line (CLI.md). */
import { Command, CommanderError } from 'commander';
import { lockCommand } from './lock-command.js';
import { memberCommand } from './member-command.js';
import { serverCommand } from './server-command.js';
import { statusCommand } from './status-command.js';
import { verifyCommand } from './verify-command.js';

export async function main(argv: readonly string[]): Promise<void> {
  const program = new Command('ticketing')
    .description('Ticketing: a distributed lock server with fencing tokens')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s.startsWith('error: ') ? `ticketing: ${s.slice(7)}` : s) });
  for (const cmd of [serverCommand(), lockCommand(), statusCommand(), verifyCommand(), memberCommand()]) program.addCommand(cmd.copyInheritedSettings(program));
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) process.exit(err.exitCode === 0 ? 0 : 2);
    throw err;
  }
}
