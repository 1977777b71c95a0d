/** The `ticketing` command line: `server`, `lock`, `status`, `verify` and the commands beside them. */
import { Command, CommanderError } from 'commander';
import { PROTOCOL_VERSION } from '@ticketing/protocol';
import { VERSION } from '@ticketing/server';
import { lockCommand } from './lock-command.js';
import { memberCommand } from './member-command.js';
import { locksCommand, releaseCommand } from './locks-command.js';
import { UsageError } from './options.js';
import { serverCommand } from './server-command.js';
import { snapshotCommand } from './snapshot-command.js';
import { statusCommand } from './status-command.js';
import { verifyCommand } from './verify-command.js';

/** What `ticketing --version` prints: the release, the wire protocol it speaks and the Node.js it runs on. */
export const VERSION_LINE = `ticketing ${VERSION} (wire protocol ${PROTOCOL_VERSION}, Node.js ${process.version})`;

export async function main(argv: readonly string[]): Promise<void> {
  quietOnClosedPipe();
  const program = new Command('ticketing')
    .description('Ticketing: a distributed lock server with fencing tokens')
    .version(VERSION_LINE, '-V, --version', 'print the version and exit')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s.startsWith('error: ') ? `ticketing: ${s.slice(7)}` : s) });
  for (const cmd of [serverCommand(), lockCommand(), statusCommand(), verifyCommand(), locksCommand(), releaseCommand(), memberCommand(), snapshotCommand()]) program.addCommand(cmd.copyInheritedSettings(program));
  const names = new Set(program.commands.map((c) => c.name()));
  const command = argv.find((a) => names.has(a));
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) process.exit(err.exitCode === 0 ? 0 : 2);
    if (err instanceof UsageError) {
      process.stderr.write(`ticketing${command === undefined ? '' : ` ${command}`}: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
}

/**
 * `ticketing status | head` closes our stdout early: the rest of the output
 * has nowhere to go, which is no error of ours (as for `cat`). Exit quietly
 * instead of printing an EPIPE stack trace.
 */
function quietOnClosedPipe(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') process.exit(0);
      throw err;
    });
  }
}
