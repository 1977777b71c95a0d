/** `ticketing status`, black-box: reads nodes' admin listeners and prints roles and counts. */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { runCli, tokenOf, Wire } from '@ticketing/test-support';
import { startWithAdmin } from './admin.js';

describe('ticketing status', () => {
  it("prints each node's name, role, client address, locks, waiters and connections", async () => {
    const s = await startWithAdmin(['--node', 'st-1']);
    const w = await Wire.open(s.port);
    tokenOf(await w.ask('A one 0 30'));
    tokenOf(await w.ask('A two 0 30'));
    w.send('A two 30 30\n');
    await new Promise((r) => setTimeout(r, 100));
    const r = await runCli(['status', '--addr', s.http]);
    expect(r.code).toBe(0);
    const [header, row, ...rest] = r.stdout.trimEnd().split('\n');
    expect(header!.split(/\s+/)).toEqual(['NODE', 'ROLE', 'CLIENT', 'ADDRESS', 'LOCKS', 'WAITERS', 'CONNS', 'SOURCE']);
    expect(row!.split(/\s+/)).toEqual(['st-1', 'single', s.address, '2', '1', '1', s.http]);
    expect(rest).toEqual([`serving clients: ${s.address}`]);
    w.destroy();
    await s.stop();
  });

  it('uses the admin token from --token or TICKETING_HTTP_TOKEN, and exits 1 without it', async () => {
    const s = await startWithAdmin(['--node', 'st-2', '--http-token', 'tok-123']);
    const without = await runCli(['status', '--addr', s.http]);
    expect(without.code).toBe(1);
    expect(without.stdout).toContain('admin token required');
    const flag = await runCli(['status', '--addr', s.http, '--token', 'tok-123']);
    expect(flag.code).toBe(0);
    expect(flag.stdout).toMatch(/^st-2 +single /m);
    process.env.TICKETING_HTTP_TOKEN = 'tok-123';
    try {
      expect((await runCli(['status', '--addr', s.http])).code).toBe(0);
    } finally {
      delete process.env.TICKETING_HTTP_TOKEN;
    }
    await s.stop();
  });

  it('reports a node it cannot reach and exits 1, still printing the others', async () => {
    const s = await startWithAdmin(['--node', 'st-3']);
    const r = await runCli(['status', '--addr', `${s.http},127.0.0.1:9`, '--timeout', '2']);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^st-3 +single /m);
    expect(r.stdout).toMatch(/^\? +unreachable .*127\.0\.0\.1:9: /m);
    await s.stop();
  });
});

describe('ticketing status in a cluster', () => {
  it('lists the peers a node reports, with their role, reachability and lag, once each', async () => {
    // A stand-in admin listener: what a cluster node's /status looks like.
    const node = (name: string, role: string, peers: object[]) => ({
      node: name, role, listen: `10.0.0.${name.slice(-1)}:5225`, active: '10.0.0.1:5225', locks: { held: 5, waiting: 2 }, connections: 9, peers,
    });
    const statuses = [
      {
        ...node('c1', 'active', [
          { name: 'c2', address: '10.0.0.2:5225', role: 'standby', reachable: true, lag: 3 },
          { name: 'c3', address: '10.0.0.3:5225', role: 'unknown', reachable: false },
        ]),
        replication: { standbysAcking: 0, syncStandbys: 0, alone: true },
      },
      node('c2', 'standby', [{ name: 'c1', address: '10.0.0.1:5225', role: 'active', reachable: true }]),
    ];
    const servers = statuses.map((body) => createServer((_req, res) => res.end(JSON.stringify(body))).listen(0, '127.0.0.1'));
    await Promise.all(servers.map(async (srv) => new Promise((r) => srv.once('listening', r))));
    const addrs = servers.map((srv) => `127.0.0.1:${(srv.address() as AddressInfo).port}`);
    const r = await runCli(['status', '--addr', addrs.join(',')]);
    for (const srv of servers) srv.close();
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines.at(-1)).toBe('serving clients: 10.0.0.1:5225');
    const rows = lines.slice(1, -1).map((l) => l.split(/ {2,}/));
    expect(rows).toEqual([
      ['c1', 'active', '10.0.0.1:5225', '5', '2', '9', `${addrs[0]} (NO STANDBY ACKNOWLEDGES its replication)`],
      ['c3', 'unknown', '10.0.0.3:5225', '-', '-', '-', 'as seen by c1: UNREACHABLE'],
      ['c2', 'standby', '10.0.0.2:5225', '5', '2', '9', addrs[1]],
    ]);
  });
});
