/**
 * A throw-away PostgreSQL cluster for tests: initdb in a temp dir, `postgres`
 * on a free loopback port, removed again at stop. PostgreSQL refuses to run
 * as root (CI runs as root), so then it runs as the `postgres` OS user.
 * Fails loudly when it cannot start: the fence tests must never be skipped.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '@ticketing/test-support';

export interface Postgres {
  readonly port: number;
  /** A new connected client (the caller ends it). */
  client(): Promise<pg.Client>;
  stop(): Promise<void>;
}

function binDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'postgres'))) : [];
  if (versions.length === 0) {
    throw new Error('PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres): run scripts/install-test-deps.sh as root');
  }
  versions.sort((a, b) => Number(b) - Number(a));
  return join(root, versions[0]!, 'bin');
}

/** Runs `file args` as the postgres OS user when we are root, else as ourselves. */
function asDbUser(file: string, args: string[]): [string, string[]] {
  return process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', file, ...args]] : [file, args];
}

export async function startPostgres(): Promise<Postgres> {
  const bin = binDir();
  const dir = mkdtempSync(join(tmpdir(), 'ticketing-pg-'));
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    chownSync(dir, uid, gid);
  }
  chmodSync(dir, 0o700);
  const data = join(dir, 'data');
  const [initFile, initArgs] = asDbUser(join(bin, 'initdb'), ['-D', data, '-U', 'test', '-A', 'trust', '--no-sync', '-E', 'UTF8', '--locale', 'C']);
  execFileSync(initFile, initArgs, { stdio: 'pipe' });
  const port = await freePort();
  const [file, args] = asDbUser(join(bin, 'postgres'), [
    '-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off',
  ]);
  const proc: ChildProcess = spawn(file, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  proc.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  const exited = new Promise<void>((resolve) => proc.on('exit', () => resolve()));

  const connect = async () => {
    const c = new pg.Client({ host: '127.0.0.1', port, user: 'test', database: 'postgres' });
    await c.connect();
    return c;
  };
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      await (await connect()).end();
      break;
    } catch (err) {
      if (proc.exitCode !== null || Date.now() > deadline) {
        proc.kill('SIGKILL');
        throw new Error(`PostgreSQL did not start: ${(err as Error).message}\n${log}`, { cause: err });
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    port,
    client: connect,
    async stop() {
      // pg_ctl, not a signal to our child: runuser does not pass every signal on.
      const [stopFile, stopArgs] = asDbUser(join(bin, 'pg_ctl'), ['stop', '-D', data, '-m', 'immediate', '-w', '-t', '20']);
      try {
        execFileSync(stopFile, stopArgs, { stdio: 'pipe' });
      } catch {
        proc.kill('SIGKILL');
      }
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
