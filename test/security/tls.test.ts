/**
 * TLS on the client listener and on peer links: versions, handshake timeout,
 * client certificates, certificate reload on SIGHUP, bad settings, and
 * peer-token and TLS checks between cluster nodes.
 */
import { copyFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect as netConnect } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, freePortPairs, runCli, type RunningServer, startServer, tempDir, TestCluster, testPki, tlsTransport, tokenOf, Wire } from '@ticketing/test-support';
import { clusterIdentityOf, PRIORITY_IDENTITY, nodeCertificate, PEER_TOKEN } from './attack.js';

/** The cluster identity a priority node with peers a, b expects in HELLO (packages/server/src/peers/cluster-identity.ts). */
const PRIORITY_AB = clusterIdentityOf(PRIORITY_IDENTITY, ['a', 'b']);
const OTHER_PEER_TOKEN = '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';

const pki = testPki();
const servers: RunningServer[] = [];
let cluster: TestCluster | undefined;
afterEach(async () => {
  await Promise.all(servers.splice(0).map(async (s) => s.stop()));
  await cluster?.stop();
  cluster = undefined;
});

async function tlsServer(extra: string[] = [], cert = pki.serverCert, key = pki.serverKey): Promise<RunningServer> {
  const s = await startServer(['--tls-cert', cert, '--tls-key', key, ...extra]);
  servers.push(s);
  return s;
}

/** Resolves with the handshake error's code, or 'ok'. */
async function handshake(port: number, options: ConnectionOptions): Promise<string> {
  return new Promise((resolve) => {
    const s = tlsConnect({ host: '127.0.0.1', port, ...options });
    s.once('secureConnect', () => {
      // With TLS 1.3 a rejected client certificate shows up right after the handshake.
      s.write('P\n');
      s.once('data', () => {
        s.destroy();
        resolve('ok');
      });
    });
    s.once('error', (err: NodeJS.ErrnoException) => {
      s.destroy();
      resolve(err.code ?? err.message);
    });
    s.once('close', () => resolve('closed'));
  });
}

const ca = readFileSync(pki.caCert);

describe('TLS on the client listener', () => {
  it('serves the protocol over TLS 1.2 and 1.3, and refuses older versions', async () => {
    const s = await tlsServer();
    expect(await handshake(s.port, { ca, minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2' })).toBe('ok');
    expect(await handshake(s.port, { ca, minVersion: 'TLSv1.3' })).toBe('ok');
    expect(await handshake(s.port, { ca, minVersion: 'TLSv1', maxVersion: 'TLSv1.1' })).not.toBe('ok');
  });

  it('drops a connection that does not finish its handshake in time, and survives plain-TCP clients', async () => {
    const s = await tlsServer(['--tls-handshake-timeout', '300']);
    const raw = netConnect(s.port, '127.0.0.1');
    const closedAfter = await new Promise<number>((resolve) => {
      const t0 = performance.now();
      raw.on('error', () => {});
      raw.on('close', () => resolve(performance.now() - t0));
    });
    expect(closedAfter).toBeGreaterThanOrEqual(250);
    expect(closedAfter).toBeLessThan(3_000);
    const plain = netConnect(s.port, '127.0.0.1');
    plain.on('error', () => {});
    plain.write('A k 0 30\n');
    await new Promise((r) => plain.on('close', r));
    const w = await Wire.open(s.port, '127.0.0.1', tlsTransport({ ca }));
    expect(await w.ask('P')).toBe('P');
  });

  it('requires a client certificate signed by tls-ca when told to', async () => {
    const s = await tlsServer(['--tls-ca', pki.caCert, '--tls-require-client-cert']);
    expect(await handshake(s.port, { ca })).not.toBe('ok');
    expect(await handshake(s.port, { ca, cert: readFileSync(pki.otherServerCert), key: readFileSync(pki.otherServerKey) })).not.toBe('ok');
    expect(await handshake(s.port, { ca, cert: readFileSync(pki.clientCert), key: readFileSync(pki.clientKey) })).toBe('ok');
  });

  it('reloads certificates on SIGHUP without dropping connections or locks', async () => {
    const dir = tempDir();
    const cert = join(dir, 'server.crt');
    const key = join(dir, 'server.key');
    copyFileSync(pki.serverCert, cert);
    copyFileSync(pki.serverKey, key);
    const s = await tlsServer([], cert, key);
    const kept = await Wire.open(s.port, '127.0.0.1', tlsTransport({ ca }));
    const token = tokenOf(await kept.ask('A rotating 0 60'));
    copyFileSync(pki.otherServerCert, cert);
    copyFileSync(pki.otherServerKey, key);
    s.proc.kill('SIGHUP');
    await eventually('reloaded', () => /configuration reloaded/.test(s.stderr()), 5_000);
    expect(await handshake(s.port, { ca })).toBe('UNABLE_TO_VERIFY_LEAF_SIGNATURE');
    expect(await handshake(s.port, { ca: readFileSync(pki.otherCaCert) })).toBe('ok');
    expect(await kept.ask('P')).toBe('P');
    expect(await kept.ask(`R rotating ${token}`)).toBe('R rotating');
  });

  it('stops the start with one clear line for unreadable or mismatched TLS files', async () => {
    const missing = await runCli(['server', '--memory', '--listen', '127.0.0.1:0', '--tls-cert', '/nonexistent.crt', '--tls-key', pki.serverKey]);
    expect(missing.code).toBe(2);
    expect(missing.stderr.trim()).toMatch(/^ticketing server: cannot read tls-cert \/nonexistent\.crt: ENOENT/);
    const mismatch = await runCli(['server', '--memory', '--listen', '127.0.0.1:0', '--tls-cert', pki.serverCert, '--tls-key', pki.clientKey]);
    expect(mismatch.code).toBe(2);
    expect(mismatch.stderr.trim()).toMatch(/^ticketing server: invalid TLS settings .*key values mismatch/);
    const noCa = await runCli(['server', '--memory', '--listen', '127.0.0.1:0', '--tls-cert', pki.serverCert, '--tls-key', pki.serverKey, '--tls-require-client-cert']);
    expect(noCa.stderr.trim()).toMatch(/tls-require-client-cert needs tls-ca/);
  });
});

describe('peer links', () => {
  /** A certificate of the shared CA naming nodes a and b (and 127.0.0.1, for clients). */
  const node = nodeCertificate(pki.dir, 'node-ab', ['a', 'b']);
  const certArgs = ['--tls-cert', node.cert, '--tls-key', node.key, '--tls-ca', pki.caCert];
  const tlsArgs = [...certArgs, '--peer-token', PEER_TOKEN];

  /** Polls b's client port (TLS) until it redirects to a. */
  async function followsA(bPort: number, aPort: number): Promise<void> {
    await eventually('b follows a', async () => {
      const w = await Wire.open(bPort, '127.0.0.1', tlsTransport({ ca }));
      const reply = await w.ask('P').catch(() => '');
      w.destroy();
      return reply === `M 127.0.0.1:${aPort}`;
    }, 8_000, 50);
  }

  it('run over mutual TLS with the peer token: the standby follows the active', async () => {
    cluster = await TestCluster.create(['a', 'b'], { extraArgs: tlsArgs });
    await cluster.startAll();
    await followsA(cluster.node('b').port, cluster.node('a').port);
  });

  it('refuses a peer with a wrong peer token (proved inside the TLS session), and a peer without TLS', async () => {
    cluster = await TestCluster.create(['a', 'b']);
    await cluster.start('a', tlsArgs);
    await cluster.start('b', [...certArgs, '--peer-token', OTHER_PEER_TOKEN]);
    const a = cluster.node('a').server!;
    // a refuses b's dial (its proof) and b's listener refuses a's: both record the other as refusing them.
    await eventually('a refused b', () => /"reason":"peer-token".*peer refused this node|"code":"token".*refused a peer link/.test(a.stderr()), 8_000);
    expect(a.stderr()).not.toContain(PEER_TOKEN);
    await cluster.kill('b');
    // b speaks TLS keyed by the token alone (no certificates): a's certificate listener cannot link with it.
    await cluster.start('b', ['--peer-token', PEER_TOKEN]);
    await eventually('a sees b refuse', () => /"reason":"(certificate|version|peer-token)".*peer refused this node/.test(a.stderr()), 8_000);
  });

  // Issue 14 finding 3, issue 25 finding 6: with peer TLS on a shared CA, a peer's certificate must name the node, not its host.
  it('refuses a certificate of the shared CA that does not name the peer, unless it comes from tls-peer-ca', async () => {
    const [port, other] = (await freePortPairs(2)) as [number, number];
    const peers = `a=127.0.0.1:${port},b=127.0.0.1:${other}`;
    const hello = async (peerPort: number, cert: string, key: string): Promise<string> => {
      const socket = tlsConnect({ host: '127.0.0.1', port: peerPort, ca: [ca, readFileSync(pki.otherCaCert)], cert: readFileSync(cert), key: readFileSync(key), checkServerIdentity: () => undefined });
      socket.on('error', () => {});
      return new Promise((resolve) => {
        let got = '';
        socket.on('secureConnect', () => socket.write(`HELLO 2 b ${PRIORITY_AB} -\n`));
        socket.on('data', (d: Buffer) => {
          got += d.toString();
          if (got.includes('\n')) {
            socket.destroy();
            resolve(got.trim());
          }
        });
        socket.on('close', () => resolve(got.trim() === '' ? '(closed)' : got.trim()));
      });
    };
    // Peers verified against tls-ca (which also signs application clients): the certificate must name b; its host (IP:127.0.0.1) is not enough.
    const shared = await startServer(['--listen', `127.0.0.1:${port}`, '--node', 'a', '--peers', peers, ...certArgs]);
    servers.push(shared);
    expect(await hello(port + 1, pki.serverCert, pki.serverKey)).toBe('DENIED certificate the TLS certificate does not name b (DNS:b in its SAN)');
    expect(await hello(port + 1, pki.clientCert, pki.clientKey)).toBe('DENIED certificate the TLS certificate does not name b (DNS:b in its SAN)');
    expect(await hello(port + 1, node.cert, node.key)).toBe('WELCOME a -');
    await shared.stop();
    // With a CA of the peers' own, any of its certificates is a peer, and the shared CA's are not even accepted by TLS.
    const own = await startServer(['--listen', `127.0.0.1:${port}`, '--node', 'a', '--peers', peers, ...certArgs, '--tls-peer-ca', pki.otherCaCert]);
    servers.push(own);
    expect(await hello(port + 1, pki.otherServerCert, pki.otherServerKey)).toBe('WELCOME a -');
    expect(await hello(port + 1, pki.clientCert, pki.clientKey)).toBe('(closed)');
  });

  it('a dialer checks that the listener\'s certificate names the node it dials', async () => {
    cluster = await TestCluster.create(['a', 'b']);
    // b presents a certificate of the shared CA for this host only: a (dialling b) must not take it for b.
    await cluster.start('b', ['--tls-cert', pki.serverCert, '--tls-key', pki.serverKey, '--tls-ca', pki.caCert]);
    await cluster.start('a', certArgs);
    const a = cluster.node('a').server!;
    await eventually('a refuses b\'s certificate', () => /"peer":"b".*"reason":"certificate".*does not name b/.test(a.stderr()), 8_000);
  });
});
