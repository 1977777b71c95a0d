/** Starting and measuring the processes a benchmark needs: the server, peers, load generators. */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, sleep, spawnReady, startServer } from '@ticketing/test-support';
import type { LoadResult, LoadSpec } from './loadgen.js';

export { freePort, freePortPair, REPO, sleep } from '@ticketing/test-support';
const LOADGEN = fileURLToPath(new URL('./loadgen.js', import.meta.url));
const BARE = fileURLToPath(new URL('./bare-server.js', import.meta.url));

export interface Proc {
  readonly proc: ChildProcess;
  readonly port: number;
  /** The admin HTTP address, when the node was started with --http. */
  readonly http?: string;
  stop(): Promise<void>;
}

async function stopProc(proc: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  proc.kill(signal);
  const timer = setTimeout(() => proc.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}

/** Starts `bin/ticketing server` with `args`; resolves at its ready line. */
export async function startTicketing(args: string[], nodeArgs: string[] = []): Promise<Proc> {
  // Measured as before the admin listener was on by default: only the runs that read it ask for one.
  const adminFlag = args.includes('--http') ? [] : ['--http', 'off'];
  const server = await startServer(['--log-level', 'warn', ...adminFlag, ...args], { memory: false, nodeArgs, stderr: 'inherit', readyTimeoutMs: 0 });
  return { proc: server.proc, port: server.port, ...(server.http === undefined ? {} : { http: server.http }), stop: async () => void (await server.stop('SIGTERM', 5_000)) };
}

/** Starts a throw-away redis-server on loopback with persistence off. */
export async function startRedis(): Promise<Proc> {
  const port = await freePort();
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('Ready to accept connections')) resolve();
    });
    proc.once('error', reject);
    proc.once('exit', (code) => reject(new Error(`redis-server exited (${code}); is it installed? apt-get install redis-server`)));
  });
  return { proc, port, stop: async () => stopProc(proc) };
}

/** Starts a throw-away single-node etcd (data in a temporary directory, fsync on as by default). */
export async function startEtcd(): Promise<Proc> {
  const port = await freePort();
  const peerPort = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'bench-etcd-'));
  const proc = spawn(
    'etcd',
    [
      '--name', 'bench',
      '--data-dir', dir,
      '--listen-client-urls', `http://127.0.0.1:${port}`,
      '--advertise-client-urls', `http://127.0.0.1:${port}`,
      '--listen-peer-urls', `http://127.0.0.1:${peerPort}`,
      '--initial-advertise-peer-urls', `http://127.0.0.1:${peerPort}`,
      '--initial-cluster', `bench=http://127.0.0.1:${peerPort}`,
      '--log-level', 'warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  // Ready when its client port answers.
  for (let i = 0; i < 200; i++) {
    const up = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => (s.destroy(), resolve(true)));
      s.once('error', () => resolve(false));
    });
    if (up) break;
    if (proc.exitCode !== null) throw new Error('etcd exited at start; is it installed? apt-get install etcd-server');
    await sleep(50);
  }
  return {
    proc,
    port,
    stop: async () => {
      await stopProc(proc);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Runs one workload in its own process and returns its result. */
export async function runLoad(spec: LoadSpec, cpuOf?: ChildProcess): Promise<LoadResult> {
  const { result } = await startLoad(spec, cpuOf);
  return result;
}

/**
 * Starts a workload; resolves with its result and a handle to stop it (hold/idle keep running).
 * With `cpuOf`, the result also says how much CPU that process (the server) spent per
 * operation inside the measuring window, which the generator marks over IPC.
 */
export async function startLoad(spec: LoadSpec, cpuOf?: ChildProcess): Promise<{ result: LoadResult; stop: () => Promise<void> }> {
  const proc = spawn(process.execPath, [LOADGEN, JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  // The window's end arrives over IPC, the result over stdout: wait for both.
  const serverCpu = cpuInWindow(proc, cpuOf);
  const result = await new Promise<LoadResult>((resolve, reject) => {
    let out = '';
    proc.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) resolve(JSON.parse(out.split('\n')[0]!) as LoadResult);
    });
    proc.once('exit', (code) => reject(new Error(`load generator exited (${code}) without a result`)));
  });
  const cpu = await serverCpu;
  if (cpu !== undefined && result.ops > 0) result.serverCpuUsPerOp = cpu / result.ops;
  return { result, stop: async () => stopProc(proc) };
}

/**
 * CPU microseconds `cpuOf` (the server) spends inside the measuring window
 * of the load process `load`, which marks the window over IPC
 * ('measure-start', 'measure-end'); undefined without `cpuOf` or marks.
 */
export async function cpuInWindow(load: ChildProcess, cpuOf: ChildProcess | undefined): Promise<number | undefined> {
  return new Promise((resolve) => {
    if (cpuOf?.pid === undefined) return resolve(undefined);
    let cpuStart: number | undefined;
    load.on('message', (m) => {
      if (m === 'measure-start') cpuStart = cpuMicros(cpuOf.pid!);
      if (m === 'measure-end') resolve(cpuStart === undefined ? undefined : cpuMicros(cpuOf.pid!) - cpuStart);
    });
    load.once('exit', () => resolve(undefined));
  });
}

let clockTicks: number | undefined;

/** CPU time (user + system) a process has used, in microseconds, from /proc/<pid>/stat (Linux). */
export function cpuMicros(pid: number): number {
  clockTicks ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces, inside parentheses): utime is the 12th, stime the 13th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / clockTicks;
}

/** Starts the bare reference lock server (bare-server.ts): the ceiling the pairs scenario compares with. */
export async function startBare(): Promise<Proc> {
  const bare = await spawnReady(process.execPath, [BARE, '0'], { stderr: 'inherit', label: 'bare server' });
  return { proc: bare.proc, port: Number(bare.readyLine.split(' ')[1]), stop: async () => void (await bare.stop('SIGTERM', 5_000)) };
}

/** Resident set size of a process, in bytes (Linux). */
export function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /VmRSS:\s+(\d+) kB/.exec(status);
  return m === null ? NaN : Number(m[1]) * 1024;
}

