/**
 * The admin listener's default (issue 18): on, on loopback at the client
 * port + 4000; a taken default port is skipped with a warning, an explicit
 * one stops the start; `--http off` turns it off. Ports come from the
 * free-port helper: never the real defaults (5225, 9225).
 */
import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { adminPlan, configSchema } from '@ticketing/server';
import { freePortPairs, runCli, startServer, type RunningServer } from '@ticketing/test-support';
import { get } from './admin.js';

const started: RunningServer[] = [];
const blockers: Server[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map(async (s) => s.stop()));
  await Promise.all(blockers.splice(0).map(async (b) => new Promise((r) => b.close(r))));
});

/** A client port p below 61536 with p and p + 4000 free. */
async function portPair(): Promise<number> {
  for (;;) {
    const [p] = await freePortPairs(1);
    if (p! + 4000 > 65_535) continue;
    const probe = await hold(p! + 4000);
    if (probe === undefined) continue;
    await new Promise((r) => probe.close(r));
    return p!;
  }
}

async function hold(port: number): Promise<Server | undefined> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(undefined));
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

describe('admin listener default', () => {
  it('is 127.0.0.1:9225 for the default server, what `ticketing status` asks without --addr', async () => {
    expect(adminPlan(configSchema.parse({}))).toEqual({ address: '127.0.0.1:9225', explicit: false });
    expect(adminPlan(configSchema.parse({ listen: '0.0.0.0:5227' }))).toEqual({ address: '127.0.0.1:9227', explicit: false });
    expect(adminPlan(configSchema.parse({ listen: '127.0.0.1:0' }))).toEqual({ address: '127.0.0.1:0', explicit: false });
    expect(adminPlan(configSchema.parse({ listen: '127.0.0.1:62000' })).address).toBeUndefined();
    expect(adminPlan(configSchema.parse({ http: 'off' })).address).toBeUndefined();
    expect(adminPlan(configSchema.parse({ http: '10.0.0.1:80' }))).toEqual({ address: '10.0.0.1:80', explicit: true });
    const help = await runCli(['status', '--help']);
    expect(help.stdout).toMatch(/default: "127\.0\.0\.1:9225"/);
  });

  it('listens on loopback at the client port + 4000 and names it in the ready line', async () => {
    const p = await portPair();
    const s = await startServer(['--listen', `127.0.0.1:${p}`], { defaultHttp: true });
    started.push(s);
    expect(s.readyLine).toMatch(new RegExp(`^ready role=single node=\\S+ listen=127\\.0\\.0\\.1:${p} http=127\\.0\\.0\\.1:${p + 4000}$`));
    expect((await get(`127.0.0.1:${p + 4000}`, '/readyz')).text).toBe('ready role=single\n');
    const status = await runCli(['status', '--addr', `127.0.0.1:${p + 4000}`]);
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(new RegExp(`single +127\\.0\\.0\\.1:${p} `));
  });

  it('runs without it, with a warning, when the default port is taken', async () => {
    const p = await portPair();
    const blocker = await hold(p + 4000);
    expect(blocker).toBeDefined();
    blockers.push(blocker!);
    const s = await startServer(['--listen', `127.0.0.1:${p}`], { defaultHttp: true });
    started.push(s);
    expect(s.readyLine).toMatch(new RegExp(`^ready role=single node=\\S+ listen=127\\.0\\.0\\.1:${p}$`));
    expect(s.stderr()).toMatch(/default admin listener address is taken/);
    expect(s.stderr()).toContain(`127.0.0.1:${p + 4000}`);
  });

  it('refuses to start (exit 2) when an explicit --http is taken', async () => {
    const p = await portPair();
    const blocker = await hold(p + 4000);
    blockers.push(blocker!);
    await expect(startServer(['--listen', `127.0.0.1:${p}`, '--http', `127.0.0.1:${p + 4000}`])).rejects.toThrow(/exited \(2\).*cannot start.*EADDRINUSE/s);
  });

  it('is off with --http off, and rejects other words', async () => {
    const s = await startServer(['--http', 'off']);
    started.push(s);
    expect(s.readyLine).not.toMatch(/http=/);
    const bad = await runCli(['server', '--memory', '--listen', '127.0.0.1:0', '--http', 'on']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/invalid --http: "on" must be HOST:PORT .*or off/);
  });
});
