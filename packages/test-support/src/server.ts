/**
 * Starts the real `bin/ticketing server` for black-box tests and benchmarks,
 * and runs the other `ticketing` commands to completion.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnReady, type ReadyProcess } from './process.js';

/** The repository's root (this file is packages/test-support/{src,dist}/server.*). */
export const REPO = fileURLToPath(new URL('../../../', import.meta.url));
/** The command users run: the root bin/ticketing (a link to packages/cli/bin/ticketing). */
export const BIN = join(REPO, 'bin', 'ticketing');

export interface RunningServer extends ReadyProcess {
  readonly host: string;
  readonly port: number;
  readonly address: string;
  /** The admin HTTP address (from the ready line), unless started with --http off. */
  readonly http: string | undefined;
}

const tempDirs: string[] = [];

/** A new temporary directory, removed when the test process exits (servers using it are gone by then). */
export function tempDir(prefix = 'ticketing-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  if (tempDirs.push(dir) === 1) process.once('exit', removeTempDirs);
  return dir;
}

function removeTempDirs(): void {
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/** The parts of a node's /status the tests read. */
export interface NodeStatusJson {
  readonly role: string;
  readonly uptimeMs: number;
  readonly locks: { readonly held: number; readonly waiting: number };
}

/**
 * What a running server says at /status (startServer gives it an admin listener): tests wait on
 * it (a waiter queued, a lock replicated) instead of sleeping.
 */
export async function adminStatus(server: Pick<RunningServer, 'http'>): Promise<NodeStatusJson> {
  if (server.http === undefined) throw new Error('the server runs without an admin listener (--http off)');
  return (await (await fetch(`http://${server.http}/status`)).json()) as NodeStatusJson;
}

export interface StartServerOptions {
  /** Add `--memory` unless the args name a data directory or a config file (default true). */
  readonly memory?: boolean;
  /** Add `--listen 127.0.0.1:0` unless the args have a --listen (default true; false lets a config file choose). */
  readonly listen?: boolean;
  readonly env?: NodeJS.ProcessEnv;
  /** Another `ticketing` executable (a deployed copy). */
  readonly bin?: string;
  /** Options for node itself, before the script (--cpu-prof, ...). */
  readonly nodeArgs?: readonly string[];
  readonly stderr?: 'pipe' | 'inherit';
  /** See SpawnReadyOptions; default 10 s. */
  readonly readyTimeoutMs?: number;
  /** Leave the admin listener at its default address (client port + 4000) instead of a free port. */
  readonly defaultHttp?: boolean;
  /**
   * The server's working directory. Default: a new temporary directory, so a relative default
   * (./ticketing-data when a config file names no data directory) never reaches the repository,
   * where the quick start's server holds it.
   */
  readonly cwd?: string;
}

/**
 * Runs `ticketing server` with `args` (default `--memory`, a free port on
 * 127.0.0.1) and resolves once it prints its ready line.
 */
export async function startServer(args: string[] = [], options: StartServerOptions = {}): Promise<RunningServer> {
  const full = ['server'];
  if (options.listen !== false && !args.some((a) => a.startsWith('--listen'))) full.push('--listen', '127.0.0.1:0');
  if (options.memory !== false && !args.includes('--data-dir') && !args.includes('--config')) full.push('--memory');
  // The admin listener's default port (client port + 4000) could take a port another test has just found free.
  if (options.defaultHttp !== true && !args.includes('--http') && !args.includes('--config')) full.push('--http', '127.0.0.1:0');
  full.push(...args);
  const bin = options.bin ?? BIN;
  const ready = await spawnReady(process.execPath, [...(options.nodeArgs ?? []), bin, ...full], {
    label: `${bin} ${full.join(' ')}`,
    ...(options.env === undefined ? {} : { env: options.env }),
    ...(options.stderr === undefined ? {} : { stderr: options.stderr }),
    ...(options.readyTimeoutMs === undefined ? {} : { readyTimeoutMs: options.readyTimeoutMs }),
    cwd: options.cwd ?? tempDir('ticketing-cwd-'),
  });
  const m = /listen=(\S+):(\d+)/.exec(ready.readyLine);
  if (m === null) {
    await ready.stop('SIGKILL');
    throw new Error(`unexpected ready line: ${ready.readyLine}`);
  }
  const host = m[1]!.replace(/^\[|\]$/g, '');
  const port = Number(m[2]);
  return { ...ready, host, port, address: `${m[1]}:${port}`, http: /http=(\S+)/.exec(ready.readyLine)?.[1] };
}

/** Runs `ticketing` with `args` to completion (for commands that exit by themselves); `env` adds to the environment. */
export async function runCli(args: string[], timeoutMs = 10_000, env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => proc.on('exit', (c) => resolve(c)));
  clearTimeout(timer);
  return { code, stdout, stderr };
}

/** Starts `ticketing server --config FILE` exactly as a systemd unit from the deployment page would (no other flag). */
export async function startWithConfig(configFile: string, bin = BIN): Promise<RunningServer> {
  return startServer(['--config', configFile], { listen: false, memory: false, bin });
}
