/**
 * The client's TLS modes against a `node:tls` front end (certificates made
 * at test time with the openssl CLI) that passes bytes to the real server.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { createServer, type Server } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidArgumentError, NoConnectionError, TicketBroker, type TlsOption } from '../../packages/client/src/index.js';
import { type RunningServer, startServer, tempDir, testPki } from '@ticketing/test-support';
import { rejection, uniqueKey as k } from './helpers/client.js';

let server: RunningServer;
let front: Server;
let address: string;
let dir: string;
const sockets = new Set<{ destroy(): void }>();

/** A CA and a server certificate for 127.0.0.1 signed by it, plus an unrelated CA. */
function makeCertificates(): void {
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  for (const ca of ['ca', 'other-ca']) ssl('req', '-x509', ...ec, '-keyout', `${ca}.key`, '-out', `${ca}.crt`, '-days', '1', '-subj', `/CN=${ca}`);
  ssl('req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost');
  writeFileSync(join(dir, 'ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  ssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.crt', '-days', '1', '-extfile', 'ext.cnf');
}

beforeAll(async () => {
  dir = tempDir('ticketing-tls-');
  makeCertificates();
  server = await startServer();
  front = createServer({ key: readFileSync(join(dir, 'server.key')), cert: readFileSync(join(dir, 'server.crt')), allowHalfOpen: true }, (tls) => {
    const plain = connect({ port: server.port, host: server.host, allowHalfOpen: true });
    sockets.add(tls).add(plain);
    tls.pipe(plain).pipe(tls);
    tls.on('error', () => plain.destroy());
    plain.on('error', () => tls.destroy());
  });
  front.on('connection', (raw: { destroy(): void }) => sockets.add(raw));
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  address = `127.0.0.1:${(front.address() as { port: number }).port}`;
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((r) => front.close(r));
  await server.stop();
});

async function roundTrip(tls: TlsOption, to = address): Promise<void> {
  const broker = TicketBroker.connect(to, { tls });
  try {
    await broker.waitReady(5_000);
    const ticket = await broker.acquire(k(), { waitMs: 0, leaseMs: 5_000 });
    expect(await ticket.release()).toBe('released');
  } finally {
    await broker.close();
  }
}

describe('tls', () => {
  it('verifies the server against a CA given as a file path', async () => {
    await roundTrip({ ca: join(dir, 'ca.crt') });
  });

  it('verifies the server against a CA given as PEM text', async () => {
    await roundTrip({ ca: readFileSync(join(dir, 'ca.crt'), 'utf8') });
  });

  it("skips verification with 'insecure', and warns", async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      await roundTrip('insecure');
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.some((w) => (w as Error & { code?: string }).code === 'TICKETING_TLS_INSECURE')).toBe(true);
  });

  for (const [what, tls] of [
    ['the system trust store', 'system'],
    ['another CA', { ca: 'other-ca.crt' }],
  ] as const) {
    it(`refuses a certificate that ${what} does not vouch for`, async () => {
      const option: TlsOption = typeof tls === 'string' ? tls : { ca: join(dir, tls.ca) };
      const broker = TicketBroker.connect(address, { tls: option });
      try {
        const err = await rejection(broker.waitReady(1_000), NoConnectionError);
        expect(String((err.cause as Error | undefined)?.message)).toMatch(/certificate|self.signed|issuer/i);
      } finally {
        await broker.close();
      }
    });
  }

  it('refuses to speak plain text to a TLS listener (no usable connection)', async () => {
    const broker = TicketBroker.connect(address);
    try {
      await rejection(broker.waitReady(500), NoConnectionError);
    } finally {
      await broker.close();
    }
  });

  it("speaks TLS to the server's own TLS listener, verified against its CA", async () => {
    const pki = testPki();
    const tlsServer = await startServer(['--tls-cert', pki.serverCert, '--tls-key', pki.serverKey]);
    try {
      await roundTrip({ ca: pki.caCert }, tlsServer.address);
    } finally {
      await tlsServer.stop();
    }
  });

  it('rejects an unreadable CA file at connect', () => {
    expect(() => TicketBroker.connect(address, { tls: { ca: join(dir, 'missing.crt') } })).toThrow(InvalidArgumentError);
  });
});
