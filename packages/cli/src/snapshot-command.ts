/**
 * `ticketing snapshot save|restore|inspect`: backups of the locks and the
 * token floor (the server's storage/backup.ts has the format).
 *
 * - `save FILE`: online, from the serving node through its admin listener
 *   (`GET /snapshot`, with the http-token); or, with `--data-dir`, offline
 *   from a stopped node's data directory (a Raft cluster that lost its
 *   majority: save the survivor's state, then restore it as a new cluster).
 * - `restore FILE --data-dir DIR`: writes a new data directory from FILE, in
 *   any mode; the node started on it issues tokens above the backup's floor.
 * - `inspect FILE`: checks FILE and prints what it holds.
 *
 * Exit codes: 0 done, 1 failed (refused, damaged, no node answered), 2 usage.
 */
import { readFileSync } from 'node:fs';
import { Command, Option } from 'commander';
import { backupOfDataDir, defaultNodeName, encodeBackup, parseBackup, realEnvironment, replaceFileDurablySync, restoreBackup, ServerError, type Backup } from '@ticketing/server';
import { adminAddressOption, adminTokenOptions, DEFAULT_ADMIN_ADDRESS, secret, UsageError } from './options.js';

/** The real file system, through the server's seam (files it writes are 0600). */
const { disk } = realEnvironment();

interface SaveOptions {
  http: string[];
  httpToken?: string;
  httpTokenFile?: string;
  dataDir?: string;
  node?: string;
  timeout: string;
}

function fail(message: string): never {
  process.stderr.write(`ticketing snapshot: ${message}\n`);
  process.exit(1);
}

/** Runs `work`, turning what the server's storage refuses (and file errors) into one line and exit 1. */
async function guarded<T>(work: () => T | Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof ServerError) fail(err.message);
    const e = err as NodeJS.ErrnoException;
    if (typeof e.code === 'string' && typeof e.path === 'string') fail(`${e.path}: ${e.code} (${e.message})`);
    throw err;
  }
}

function readBackup(file: string): Backup {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    fail(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  try {
    return parseBackup(text);
  } catch (err) {
    if (err instanceof ServerError) fail(`${file}: ${err.message}`);
    throw err;
  }
}

function describe(b: Backup): string {
  const at = b.mode === 'raft' ? `, log index ${b.index} term ${b.term}` : '';
  return `${b.locks.length} lock${b.locks.length === 1 ? '' : 's'}, token floor ${b.tokenFloor}, taken ${b.takenAt} from node ${b.node} (${b.mode} mode${at})`;
}

/** The backup from the first given node that serves; why each other did not give one. */
async function fetchBackup(o: SaveOptions): Promise<string> {
  const token = secret(o as unknown as Record<string, unknown>, 'httpToken', 'http-token');
  const timeout = Number(o.timeout);
  if (!Number.isFinite(timeout) || timeout <= 0 || timeout > 600) throw new UsageError(`--timeout ${o.timeout} must be 1..600 seconds`);
  if (token === undefined) throw new UsageError('a backup needs the admin token: give --http-token-file (or --http-token, TICKETING_HTTP_TOKEN)');
  const problems: string[] = [];
  for (const address of o.http) {
    try {
      const res = await fetch(`http://${address}/snapshot`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(timeout * 1000) });
      const text = await res.text();
      if (res.status === 200) return text;
      problems.push(`${address}: ${text.trim() || `HTTP ${res.status}`}`);
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      problems.push(`${address}: ${cause?.code ?? cause?.message ?? (err as Error).message}`);
    }
  }
  fail(`no backup taken: ${problems.join('; ')}`);
}

export function snapshotCommand(): Command {
  const snapshot = new Command('snapshot').description('backups: save the locks and the token floor, restore them into a new data directory, inspect a backup');

  snapshot.addCommand(
    adminTokenOptions(
      new Command('save')
        .description("save a backup to FILE: online from the serving node's admin listener, or offline from a stopped node's --data-dir")
        .argument('<file>', 'where to write the backup (replaced whole, mode 0600)')
        .addOption(adminAddressOption().default([DEFAULT_ADMIN_ADDRESS], DEFAULT_ADMIN_ADDRESS))
        .option('--data-dir <dir>', "offline: read a stopped node's data directory instead (a Raft cluster that lost its majority)")
        .addOption(new Option('--node <name>', 'offline: the name of the node whose data directory it is (recorded in the backup)').default(undefined, 'this host name'))
        .option('--timeout <seconds>', 'how long to wait for each node', '15')
        .allowExcessArguments(false),
    ).action(async (file: string, o: SaveOptions) => {
      let text: string;
      if (o.dataDir !== undefined) {
        const node = o.node ?? defaultNodeName();
        text = encodeBackup(await guarded(() => backupOfDataDir(disk, o.dataDir!, node, new Date())));
      } else {
        if (o.node !== undefined) throw new UsageError('--node goes with --data-dir (an online backup names the node that served it)');
        text = await fetchBackup(o);
      }
      // Checked before it replaces anything: a backup that does not read back is no backup.
      const backup = await guarded(() => parseBackup(text));
      // Whole or not at all, owner-only (the disk's files are 0600): it holds every key and token.
      await guarded(() => replaceFileDurablySync(disk, file, Buffer.from(text, 'utf8')));
      process.stdout.write(`saved ${file}: ${describe(backup)}\n`);
    }),
  );

  snapshot.addCommand(
    new Command('restore')
      .description('write a new data directory from a backup; the node started on it issues tokens above the backup\'s floor')
      .argument('<file>', 'the backup')
      .requiredOption('--data-dir <dir>', 'the new data directory (missing or empty)')
      .addOption(new Option('--mode <mode>', 'the mode the node will run in').choices(['single', 'priority', 'raft']).default(undefined, "the backup's"))
      .allowExcessArguments(false)
      .action(async (file: string, o: { dataDir: string; mode?: 'single' | 'priority' | 'raft' }) => {
        const backup = readBackup(file);
        const mode = o.mode ?? backup.mode;
        await guarded(async () => restoreBackup(disk, o.dataDir, backup, mode, new Date()));
        process.stdout.write(`restored ${file} into ${o.dataDir}: ${describe(backup)}\n`);
        if (mode === 'raft') {
          process.stdout.write(
            'Start a new cluster on it: either this node alone (--peers naming only itself), then add members with `ticketing member add`; ' +
              'or every member restored from this same file, all started with the same --peers.\n',
          );
        } else if (backup.locks.length > 0) {
          process.stdout.write(`The ${backup.locks.length} held lock(s) are not restored in ${mode} mode (it keeps no locks on disk): only the token floor is.\n`);
        }
      }),
  );

  snapshot.addCommand(
    new Command('inspect')
      .description('check a backup and print what it holds')
      .argument('<file>', 'the backup')
      .option('--locks', 'list the held locks too (key, token, lease ms, owner)')
      .allowExcessArguments(false)
      .action((file: string, o: { locks?: boolean }) => {
        const backup = readBackup(file);
        process.stdout.write(`${file}: ${describe(backup)}\n`);
        if (o.locks === true) for (const [key, token, leaseMs, owner] of backup.locks) process.stdout.write(`${key} ${token} ${leaseMs}${owner === undefined ? '' : ` ${owner}`}\n`);
      }),
  );
  return snapshot;
}
