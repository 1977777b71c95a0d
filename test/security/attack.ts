/**
 * What the security tests attack with: raw sockets to a node's ports, a TCP
 * relay that records and injects bytes, and the knowledge an attacker has
 * (the cluster's names and ports, never its secrets).
 */
import { createServer, connect as netConnect, type Server, type Socket } from 'node:net';
import { createHash, hkdfSync } from 'node:crypto';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { execFileSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** A 256-bit peer token (peer tokens must carry at least 128 bits). */
export const PEER_TOKEN = '5f0c1e2d3b4a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0';

/** Opens a plain TCP connection and resolves once it is connected. */
export async function rawSocket(port: number, sockets: Socket[]): Promise<Socket> {
  const s = netConnect({ host: '127.0.0.1', port });
  s.on('error', () => {});
  sockets.push(s);
  await new Promise<void>((resolve, reject) => {
    s.once('connect', () => resolve());
    s.once('close', () => reject(new Error(`connection to ${port} closed before it was up`)));
  });
  return s;
}

/** Sends `text` on a fresh connection and collects what comes back until it closes or `ms` pass. */
export async function sendAndCollect(port: number, text: string, ms = 1_500): Promise<string> {
  const s = netConnect({ host: '127.0.0.1', port });
  s.on('error', () => {});
  let got = '';
  s.on('data', (d: Buffer) => (got += d.toString('latin1')));
  s.once('connect', () => s.write(text));
  await new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    s.once('close', () => (clearTimeout(t), resolve()));
  });
  s.destroy();
  return got;
}

/** The mode name a priority cluster's identity is computed for (its role protocol's version). */
export const PRIORITY_IDENTITY = 'priority-v2';

/** The handshake's cluster identity, as an attacker computes it from the peers list (no secret in it). */
export function clusterIdentityOf(mode: string, names: string[]): string {
  return createHash('sha256').update(`${mode}\n${names.join(',')}`).digest('hex').slice(0, 16);
}

/**
 * A TCP relay (a man in the middle on a peer link): forwards both ways,
 * records what passes toward the target, and can inject bytes into that
 * direction.
 */
export class Relay {
  readonly toTarget: Buffer[] = [];
  private readonly upstreams = new Set<Socket>();
  private constructor(private readonly server: Server) {}

  static async start(listenPort: number, targetPort: number): Promise<Relay> {
    const server = createServer((client) => {
      const upstream = netConnect({ host: '127.0.0.1', port: targetPort });
      relay.upstreams.add(upstream);
      client.on('error', () => {});
      upstream.on('error', () => {});
      client.on('data', (d: Buffer) => {
        relay.toTarget.push(d);
        upstream.write(d);
      });
      upstream.on('data', (d: Buffer) => client.write(d));
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => {
        relay.upstreams.delete(upstream);
        client.destroy();
      });
    });
    const relay = new Relay(server);
    await new Promise<void>((r) => server.listen(listenPort, '127.0.0.1', () => r()));
    return relay;
  }

  get recorded(): string {
    return Buffer.concat(this.toTarget).toString('latin1');
  }

  /** Writes `text` toward the target on every open connection. */
  inject(text: string): void {
    for (const u of this.upstreams) u.write(text);
  }

  async close(): Promise<void> {
    for (const u of this.upstreams) u.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

/** Pino lines of `stderr` at warn (40) or above. */
export function warnings(stderr: string): string[] {
  return stderr.split('\n').filter((l) => /"level":(4|5|6)0/.test(l));
}

/**
 * A node certificate signed by the test CA (testPki) whose SAN names `names`
 * (node names as DNS names) and 127.0.0.1: what an operator issues per node.
 */
export function nodeCertificate(pkiDir: string, label: string, names: string[]): { cert: string; key: string } {
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: pkiDir, stdio: ['ignore', 'ignore', 'pipe'] });
  const cert = join(pkiDir, `${label}.crt`);
  const key = join(pkiDir, `${label}.key`);
  if (existsSync(cert)) return { cert, key };
  run(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', `${label}.csr`, '-subj', `/CN=${label}`]);
  writeFileSync(join(pkiDir, `${label}.ext`), `subjectAltName=${[...names.map((n) => `DNS:${n}`), 'IP:127.0.0.1'].join(',')}\nextendedKeyUsage=serverAuth,clientAuth\n`);
  run(['x509', '-req', '-in', `${label}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', cert, '-days', '30', '-extfile', `${label}.ext`]);
  return { cert, key };
}

/** The TLS-PSK offer of a peer token, derived as docs/security.md says (HKDF-SHA256, TLS 1.3 external PSK). */
export function pskOf(token: string): { identity: string; psk: Buffer } {
  const derive = (info: string, n: number) => Buffer.from(hkdfSync('sha256', Buffer.from(token, 'utf8'), 'ticketing peer link v1', info, n));
  return { identity: `ticketing-peer-1.${derive('key id', 8).toString('hex')}`, psk: derive('tls13 psk', 32) };
}

/** A peer link as a node holding `token` opens it: TLS-PSK to `peerPort`, HELLO as `name`. Resolves with the answer line and the socket. */
export async function pskLink(peerPort: number, token: string, name: string, cluster: string): Promise<{ answer: string; socket: TLSSocket }> {
  const { identity, psk } = pskOf(token);
  const socket = tlsConnect({ host: '127.0.0.1', port: peerPort, minVersion: 'TLSv1.3', ciphers: 'TLS_AES_128_GCM_SHA256', checkServerIdentity: () => undefined, pskCallback: () => ({ identity, psk }) });
  socket.on('error', () => {});
  let got = '';
  socket.on('data', (d: Buffer) => (got += d.toString()));
  socket.once('secureConnect', () => socket.write(`HELLO 2 ${name} ${cluster} -\n`));
  const deadline = Date.now() + 3_000;
  while (!got.includes('\n') && !socket.destroyed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  return { answer: got.split('\n')[0] ?? '', socket };
}

/** The cluster identity a node expects, as the node itself tells a token holder that gets it wrong. */
export async function learnClusterIdentity(peerPort: number, token: string, name: string): Promise<string> {
  const { answer, socket } = await pskLink(peerPort, token, name, '0000000000000000');
  socket.destroy();
  const m = /\(ours ([0-9a-f]+),/.exec(answer);
  if (m === null) throw new Error(`no cluster identity in ${JSON.stringify(answer)}`);
  return m[1]!;
}
