/**
 * Child processes that announce readiness with their first stdout line (the
 * `ready ...` line of `ticketing server`, the result line of a load
 * generator). One place for spawn, wait, stderr capture and stop.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { LineSplitter } from './lines.js';

export interface ReadyProcess {
  readonly proc: ChildProcess;
  /** The first line the process wrote to stdout. */
  readonly readyLine: string;
  /** Everything it wrote to stderr so far ('' when stderr is inherited). */
  stderr(): string;
  /** Resolves with the exit code (or signal name) once the process has exited. */
  readonly exited: Promise<number | string>;
  /**
   * Sends `signal` (if it still runs) and resolves with how it exited. With
   * `killAfterMs`, a process still running that long after gets SIGKILL.
   */
  stop(signal?: NodeJS.Signals, killAfterMs?: number): Promise<number | string>;
}

export interface SpawnReadyOptions {
  readonly env?: NodeJS.ProcessEnv;
  /** 'pipe' (default) keeps stderr for error messages and stderr(); 'inherit' passes it through. */
  readonly stderr?: 'pipe' | 'inherit';
  /** How long to wait for the first line; 0 waits as long as it takes. Default 10 s. */
  readonly readyTimeoutMs?: number;
  /** Names the process in errors. */
  readonly label?: string;
  /** The working directory (default: the test's own). */
  readonly cwd?: string;
}

/** Spawns `file args` and resolves at its first stdout line; rejects if it exits or times out first. */
export async function spawnReady(file: string, args: readonly string[], options: SpawnReadyOptions = {}): Promise<ReadyProcess> {
  const label = options.label ?? 'process';
  const timeoutMs = options.readyTimeoutMs ?? 10_000;
  const proc = spawn(file, args, {
    stdio: ['ignore', 'pipe', options.stderr ?? 'pipe'],
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    ...(options.env === undefined ? {} : { env: { ...process.env, ...options.env } }),
  });
  let err = '';
  proc.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | string>((resolve) => proc.on('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  const readyLine = await new Promise<string>((resolve, reject) => {
    const timer = timeoutMs === 0 ? undefined : setTimeout(() => reject(new Error(`${label} did not get ready in ${timeoutMs / 1000} s; stderr: ${err}`)), timeoutMs);
    const lines = new LineSplitter();
    let first: string | undefined;
    // Keep reading stdout after the first line, so the child never blocks on a full pipe.
    proc.stdout!.on('data', (d: Buffer) => {
      if (first !== undefined) return;
      lines.push(d, (line) => {
        first = line;
        clearTimeout(timer);
        resolve(line);
        return false;
      });
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${label} exited (${code}) before it was ready; stderr: ${err}`));
    });
  });
  return {
    proc,
    readyLine,
    stderr: () => err,
    exited,
    async stop(signal: NodeJS.Signals = 'SIGTERM', killAfterMs?: number) {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      const timer = killAfterMs === undefined ? undefined : setTimeout(() => proc.kill('SIGKILL'), killAfterMs);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}
