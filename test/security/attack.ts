/**
 * What the security tests attack with: raw sockets to a node's ports, a TCP
 * relay that records and injects bytes, and the knowledge an attacker has
 * (the cluster's names and ports, never its secrets).
 */
import { createServer, connect as netConnect, type Server, type Socket } from 'node:net';
import { createHash } from 'node:crypto';
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

/** The old handshake's cluster identity, as an attacker computes it from the peers list (no secret in it). */
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
