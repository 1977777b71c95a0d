/**
 * Starts the real `bin/ticketing server` for black-box tests and stops it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const BIN = fileURLToPath(new URL('../../bin/ticketing', import.meta.url));

export interface RunningServer {
  readonly proc: ChildProcess;
  readonly host: string;
  readonly port: number;
  readonly address: string;
  /** The admin HTTP address (from the ready line), unless started with --http off. */
  readonly http: string | undefined;
  readonly readyLine: string;
  /** Everything the server wrote to stderr so far. */
  stderr(): string;
  /** Resolves with the exit code (or signal name) once the process has exited. */
  readonly exited: Promise<number | string>;
  stop(signal?: NodeJS.Signals): Promise<number | string>;
}

export function tempDir(prefix = 'ticketing-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/**
 * Runs `ticketing server` with `args` (default `--memory`, a free port on
 * 127.0.0.1) and resolves once it prints its ready line.
 */
export async function startServer(
  args: string[] = [],
  options: { memory?: boolean; env?: NodeJS.ProcessEnv; defaultHttp?: boolean } = {},
): Promise<RunningServer> {
  const full = ['server', ...(args.some((a) => a.startsWith('--listen')) ? [] : ['--listen', '127.0.0.1:0'])];
  if (options.memory !== false && !args.includes('--data-dir') && !args.includes('--config')) full.push('--memory');
  // The admin listener's default port (client port + 4000) could take a port another test has just found free.
  if (options.defaultHttp !== true && !args.includes('--http') && !args.includes('--config')) full.push('--http', '127.0.0.1:0');
  full.push(...args);
  const proc = spawn(process.execPath, [BIN, ...full], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...options.env } });
  let err = '';
  let out = '';
  proc.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | string>((resolve) => proc.on('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  const readyLine = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not get ready in 10 s; stderr: ${err}`)), 10_000);
    proc.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf('\n');
      if (nl >= 0) {
        clearTimeout(timer);
        resolve(out.slice(0, nl));
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`server exited (${code}) before it was ready; stderr: ${err}`));
    });
  });
  const m = /listen=(\S+):(\d+)/.exec(readyLine);
  if (m === null) throw new Error(`unexpected ready line: ${readyLine}`);
  const host = m[1]!.replace(/^\[|\]$/g, '');
  const port = Number(m[2]);
  return {
    proc,
    host,
    port,
    address: `${m[1]}:${port}`,
    http: /http=(\S+)/.exec(readyLine)?.[1],
    readyLine,
    stderr: () => err,
    exited,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      return exited;
    },
  };
}

/** Runs `ticketing` with `args` to completion (for commands that exit by themselves). */
export async function runCli(args: string[], timeoutMs = 10_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => proc.on('exit', (c) => resolve(c)));
  clearTimeout(timer);
  return { code, stdout, stderr };
}
