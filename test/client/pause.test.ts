/**
 * Issue 28 defect 1 under a real SIGSTOP: a client process is stopped for
 * longer than its acquire's wait + 5 s while the grant reaches its socket.
 * When it runs again, it must read that grant (a ticket with the lease that
 * is left, released by its token afterwards), not call it INDETERMINATE and
 * leave the key held by nobody for the whole lease.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TicketBroker } from '../../packages/client/src/index.js';
import { type RunningServer, sleep, startServer, tokenOf, Wire } from '@ticketing/test-support';
import { uniqueKey } from './helpers/client.js';

let server: RunningServer;
let holder: TicketBroker;

beforeAll(async () => {
  server = await startServer();
  holder = TicketBroker.connect(server.address);
  await holder.waitReady(5_000);
});
afterAll(async () => {
  await holder.close();
  await server.stop();
});

describe('a client process paused by SIGSTOP', () => {
  it('keeps the grant that reached its socket meanwhile, and releases it', async () => {
    const key = uniqueKey('paused');
    const child = spawn(process.execPath, [new URL('./helpers/pause-child.mjs', import.meta.url).pathname], {
      env: { ...process.env, TICKETING_ADDR: server.address, TICKETING_KEY: key, ...(process.env.PAUSE_CLIENT_DIST ? { CLIENT_DIST: process.env.PAUSE_CLIENT_DIST } : {}) },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const lines: Array<Record<string, unknown>> = [];
    createInterface({ input: child.stdout }).on('line', (l) => lines.push(JSON.parse(l) as Record<string, unknown>));
    const until = async (what: string, check: () => boolean, ms: number): Promise<void> => {
      const deadline = Date.now() + ms;
      while (!check()) {
        if (Date.now() > deadline) throw new Error(`not ${what} within ${ms} ms: ${JSON.stringify(lines)}`);
        await sleep(20);
      }
    };
    try {
      await until('ready', () => lines.some((l) => l.ready === true), 10_000);
      await holder.acquire(key, { waitMs: 0, leaseMs: 2_000 }); // ends 2 s from now: then the child is granted
      child.stdin.write('go\n');
      await until('sent', () => lines.some((l) => l.sent === true), 10_000);
      child.kill('SIGSTOP');
      await sleep(9_000); // > wait (3 s) + 5 s; the holder's lease ends at 2 s and the grant goes out
      // Meanwhile the server holds the key for the child (a wait-0 probe is refused).
      const wire = await Wire.open(server.port, server.host);
      expect(await wire.ask(`A ${key} 0 1`), JSON.stringify(lines)).toBe(`T ${key}`);
      child.kill('SIGCONT');
      await until('an outcome', () => lines.some((l) => 'token' in l || 'error' in l), 10_000);
      const outcome = lines.find((l) => 'token' in l || 'error' in l)!;
      expect(outcome.error).toBeUndefined();
      expect(outcome.remainingMs as number).toBeGreaterThan(10_000);
      expect(outcome.remainingMs as number).toBeLessThan(30_000 * 0.98 - 9_000);
      await until('released', () => lines.some((l) => 'release' in l), 10_000);
      expect(lines.find((l) => 'release' in l)!.release).toBe('released');
      // And the key is free again at once, not after the child's 30 s lease.
      const probe = await wire.ask(`A ${key} 0 1`);
      expect(probe.startsWith('A ')).toBe(true);
      expect(await wire.ask(`R ${key} ${tokenOf(probe)}`)).toBe(`R ${key}`);
      wire.destroy();
    } finally {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
  }, 60_000);
});
