/**
 * Issue 14, findings 5 and 6: floods of connections and running out of file
 * descriptors. Connections that never authenticate are cut at the `H`
 * deadline, one source address cannot take every slot, TLS handshakes in
 * progress count against max-conns, and a process out of file descriptors
 * keeps running (it sheds new connections for a moment, logs, and resumes).
 */
import { readFileSync } from 'node:fs';
import { connect as netConnect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { BIN, type ReadyProcess, type RunningServer, spawnReady, startServer, testPki, tlsTransport, Wire } from '@ticketing/test-support';

const servers: Array<RunningServer | ReadyProcess> = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(servers.splice(0).map(async (s) => s.stop()));
});

async function server(args: string[]): Promise<RunningServer> {
  const s = await startServer(args);
  servers.push(s);
  return s;
}

async function rawConnect(port: number): Promise<Socket> {
  const s = netConnect({ host: '127.0.0.1', port });
  s.on('error', () => {});
  sockets.push(s);
  await new Promise((r) => s.once('connect', r));
  return s;
}

describe('connection floods (issue 14, finding 5)', () => {
  it('cuts a connection that has not sent H by hello-timeout when client tokens are set', async () => {
    const s = await server(['--client-tokens', 'sesame', '--hello-timeout', '300']);
    const silent = await Wire.open(s.port);
    const t0 = performance.now();
    expect(await silent.line(3_000)).toBe('E auth no H with a client token within 300 ms');
    expect(await silent.closedWithin(2_000)).toBe(true);
    // The sweep runs each second: cut within about hello-timeout + 1 s, not at idle-timeout (60 s).
    expect(performance.now() - t0).toBeLessThan(2_500);
    const greeted = await Wire.open(s.port);
    expect(await greeted.ask('H 1 sesame')).toMatch(/^H 1 /);
    expect(await greeted.silentFor(1_500)).toBe(true);
    expect(greeted.closed).toBe(false);
    greeted.socket.destroy();
  });

  it('limits the connections of one source address (max-conns-per-address)', async () => {
    const s = await server(['--max-conns-per-address', '3']);
    const kept: Wire[] = [];
    for (let i = 0; i < 3; i++) {
      const w = await Wire.open(s.port);
      expect(await w.ask('P')).toBe('P');
      kept.push(w);
    }
    const fourth = await Wire.open(s.port);
    expect(await fourth.line()).toBe('E unavailable too many connections from this address');
    // A slot freed is a slot again.
    kept.pop()!.socket.destroy();
    await new Promise((r) => setTimeout(r, 200));
    const again = await Wire.open(s.port);
    expect(await again.ask('P')).toBe('P');
    for (const w of [...kept, again]) w.socket.destroy();
  });

  it('counts TLS handshakes in progress against max-conns', async () => {
    const pki = testPki();
    const s = await server(['--tls-cert', pki.serverCert, '--tls-key', pki.serverKey, '--max-conns', '2', '--tls-handshake-timeout', '20000']);
    // Two connections that never start their handshake hold both slots.
    await rawConnect(s.port);
    await rawConnect(s.port);
    await new Promise((r) => setTimeout(r, 100));
    const w = await Wire.open(s.port, '127.0.0.1', tlsTransport({ ca: readFileSync(pki.caCert) }));
    expect(await w.line()).toMatch(/^E unavailable too many connections/);
    w.socket.destroy();
  });
});

describe('file descriptors (issue 14, finding 6)', () => {
  it('keeps running when a flood exhausts its file descriptors, then serves again; warns at start that the limit is too low', async () => {
    // A hard limit of 256 descriptors: node itself takes a few dozen, the flood takes the rest.
    const p = await spawnReady('/bin/sh', ['-c', 'ulimit -n 256 && exec "$0" "$@"', process.execPath, BIN, 'server', '--memory', '--listen', '127.0.0.1:0', '--http', 'off'], {
      label: 'ticketing server under ulimit -n 256',
    });
    servers.push(p);
    const port = Number(/listen=127\.0\.0\.1:(\d+)/.exec(p.readyLine)![1]);
    expect(p.stderr()).toMatch(/may need about \d+ file descriptors, but this process may open only 256/);
    const flood: Socket[] = [];
    for (let i = 0; i < 400; i++) {
      const s = netConnect({ host: '127.0.0.1', port });
      s.on('error', () => {});
      flood.push(s);
    }
    await new Promise((r) => setTimeout(r, 1_500));
    for (const s of flood) s.destroy();
    await new Promise((r) => setTimeout(r, 1_500));
    const w = await Wire.open(port);
    expect(await w.ask('P')).toBe('P');
    w.socket.destroy();
    expect(p.proc.exitCode).toBeNull();
  });
});
