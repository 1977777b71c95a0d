/**
 * Client-driven load: `callers` concurrent async callers over one
 * `TicketBroker` (default pool: two connections to one address), each in a
 * loop of acquire + release on its own key. Result as JSON on stdout, like
 * loadgen.ts, so it runs in its own process.
 *
 *   node client-load.js '{"port":5225,"callers":50,"warmupMs":1000,"durationMs":5000}'
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { TicketBroker } from '@ticketing/client';
import { Histogram, ownCpuMicros } from './lines.js';
import type { LoadResult } from './loadgen.js';
import { cpuInWindow } from './procs.js';

export interface ClientLoadSpec {
  host?: string;
  port: number;
  callers: number;
  warmupMs: number;
  durationMs: number;
}

async function main(spec: ClientLoadSpec): Promise<LoadResult> {
  const broker = TicketBroker.connect(`${spec.host ?? '127.0.0.1'}:${spec.port}`);
  await broker.waitReady(5_000);
  const tag = randomBytes(3).toString('hex');
  const latency = new Histogram();
  let measuring = false;
  let running = true;
  let ops = 0;
  let errors = 0;

  const caller = async (i: number): Promise<void> => {
    const key = `c${tag}_${i}`;
    while (running) {
      const t0 = performance.now();
      try {
        const ticket = await broker.acquire(key, { waitMs: 0, leaseMs: 30_000 });
        if ((await ticket.release()) !== 'released') errors++;
      } catch {
        errors++;
        continue;
      }
      if (measuring) {
        ops++;
        latency.record(performance.now() - t0);
      }
    }
  };

  const callers = Array.from({ length: spec.callers }, async (_, i) => caller(i));
  await new Promise((r) => setTimeout(r, spec.warmupMs));
  measuring = true;
  process.send?.('measure-start');
  const t0 = performance.now();
  const c0 = ownCpuMicros();
  await new Promise((r) => setTimeout(r, spec.durationMs));
  const cpuUs = ownCpuMicros() - c0;
  measuring = false;
  process.send?.('measure-end');
  const seconds = (performance.now() - t0) / 1000;
  running = false;
  await Promise.all(callers);
  await broker.close();
  return { ops, opsPerSec: Math.round(ops / seconds), p50Ms: latency.percentile(50), p99Ms: latency.percentile(99), errors, ...(ops > 0 ? { selfCpuUsPerOp: cpuUs / ops } : {}) };
}

const SELF = fileURLToPath(import.meta.url);

/**
 * Runs the client load in its own process (never sharing an event loop with
 * the server). With `cpuOf`, the result also says how much CPU that process
 * (the server) spent per pair inside the measuring window.
 */
export async function runClientLoad(spec: ClientLoadSpec, cpuOf?: ChildProcess): Promise<LoadResult> {
  const proc = spawn(process.execPath, [SELF, JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  const serverCpu = cpuInWindow(proc, cpuOf);
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise((resolve) => proc.on('exit', resolve));
  if (code !== 0) throw new Error(`client load exited ${String(code)}`);
  const result = JSON.parse(out) as LoadResult;
  const cpu = await serverCpu;
  if (cpu !== undefined && result.ops > 0) result.serverCpuUsPerOp = cpu / result.ops;
  return result;
}

if (process.argv[1] === SELF) {
  const result = await main(JSON.parse(process.argv[2] ?? '{}') as ClientLoadSpec);
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
}
