/**
 * Issue 14, finding 9: the admin listener answers only Host headers that
 * are IP literals, localhost, or names in http-hosts (DNS rebinding from a
 * page in a local browser cannot read /status), warns when bound off
 * loopback without a token, and can serve HTTPS with the node's certificate.
 */
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { afterEach, describe, expect, it } from 'vitest';
import { testPki } from '@ticketing/test-support';
import { startWithAdmin, type AdminServer } from './admin.js';

const servers: AdminServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map(async (s) => s.stop()));
});

async function status(http: string, host: string | undefined, tls?: { ca: Buffer }): Promise<number> {
  const [hostname, port] = [http.slice(0, http.lastIndexOf(':')), Number(http.slice(http.lastIndexOf(':') + 1))];
  const request = tls === undefined ? httpRequest : httpsRequest;
  return new Promise((resolve, reject) => {
    const req = request({ hostname, port, path: '/status', headers: host === undefined ? {} : { host }, ...(tls === undefined ? {} : { ca: tls.ca, servername: 'localhost' }) }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('admin listener Host check and TLS (issue 14, finding 9)', () => {
  it('answers IP literals, localhost and configured names; 421 for any other Host (DNS rebinding)', async () => {
    const s = await startWithAdmin(['--http-hosts', 'ops.example.com']);
    servers.push(s);
    const port = s.http.slice(s.http.lastIndexOf(':') + 1);
    expect(await status(s.http, `127.0.0.1:${port}`)).toBe(200);
    expect(await status(s.http, `localhost:${port}`)).toBe(200);
    expect(await status(s.http, `ops.example.com:${port}`)).toBe(200);
    expect(await status(s.http, `rebind.attacker.example:${port}`)).toBe(421);
    expect(await status(s.http, 'attacker.example')).toBe(421);
  });

  it('warns when bound off loopback without http-token', async () => {
    const s = await startWithAdmin(['--http', '0.0.0.0:0']);
    servers.push(s);
    expect(s.stderr()).toMatch(/admin listener off loopback without http-token/);
  });

  it('serves HTTPS with the node certificate when http-tls is set', async () => {
    const pki = testPki();
    const s = await startWithAdmin(['--tls-cert', pki.serverCert, '--tls-key', pki.serverKey, '--http-tls']);
    servers.push(s);
    expect(await status(s.http, undefined, { ca: readFileSync(pki.caCert) })).toBe(200);
    await expect(status(s.http, undefined)).rejects.toThrow();
  });
});
