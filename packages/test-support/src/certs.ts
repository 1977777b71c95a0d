/**
 * Test certificates, generated at test time with the openssl CLI (never
 * committed): a CA, server and client certificates it signs, and the broken
 * variants the failure tests need (unknown CA, wrong host name, expired).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from './server.js';

export interface TestPki {
  readonly dir: string;
  readonly caCert: string;
  /** Valid for 127.0.0.1 and localhost, signed by the CA. */
  readonly serverCert: string;
  readonly serverKey: string;
  /** A client certificate signed by the CA. */
  readonly clientCert: string;
  readonly clientKey: string;
  /** Signed by the CA, but for the host name wrong.example only. */
  readonly wrongHostCert: string;
  readonly wrongHostKey: string;
  /** Signed by the CA, valid for 127.0.0.1, expired in 2020. */
  readonly expiredCert: string;
  readonly expiredKey: string;
  /** Another CA that signed nothing of the above, and a server certificate of its own. */
  readonly otherCaCert: string;
  readonly otherServerCert: string;
  readonly otherServerKey: string;
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

function makeCa(dir: string, name: string): void {
  openssl(dir, ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.crt`, '-days', '30', '-subj', `/CN=${name}`]);
}

function makeLeaf(dir: string, ca: string, name: string, san: string, extra: string[] = []): void {
  openssl(dir, ['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`]);
  writeFileSync(join(dir, `${name}.ext`), `subjectAltName=${san}\nextendedKeyUsage=serverAuth,clientAuth\n`);
  if (extra.length === 0) {
    openssl(dir, ['x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.crt`, '-CAkey', `${ca}.key`, '-CAcreateserial', '-out', `${name}.crt`, '-days', '30', '-extfile', `${name}.ext`]);
  } else {
    // `openssl ca` is the portable way to choose the validity dates (expired certificates).
    mkdirSync(join(dir, 'db'), { recursive: true });
    writeFileSync(join(dir, 'db', 'index.txt'), '');
    writeFileSync(join(dir, 'db', 'serial'), '1000\n');
    writeFileSync(
      join(dir, 'ca.cnf'),
      ['[ca]', 'default_ca=test', '[test]', 'dir=db', 'database=db/index.txt', 'serial=db/serial', 'new_certs_dir=db', 'default_md=sha256', 'policy=any', 'copy_extensions=none', '[any]', 'commonName=supplied', ''].join('\n'),
    );
    openssl(dir, ['ca', '-batch', '-config', 'ca.cnf', '-cert', `${ca}.crt`, '-keyfile', `${ca}.key`, '-in', `${name}.csr`, '-out', `${name}.crt`, '-extfile', `${name}.ext`, ...extra]);
  }
}

let cached: TestPki | undefined;

/** Generates (once per test process) the certificates the TLS tests use. */
export function testPki(): TestPki {
  if (cached !== undefined) return cached;
  const dir = tempDir('ticketing-pki-');
  makeCa(dir, 'ca');
  makeCa(dir, 'other-ca');
  makeLeaf(dir, 'ca', 'server', 'IP:127.0.0.1,DNS:localhost');
  makeLeaf(dir, 'ca', 'client', 'DNS:client.test');
  makeLeaf(dir, 'ca', 'wronghost', 'DNS:wrong.example');
  makeLeaf(dir, 'ca', 'expired', 'IP:127.0.0.1,DNS:localhost', ['-startdate', '20200101000000Z', '-enddate', '20200102000000Z']);
  makeLeaf(dir, 'other-ca', 'other-server', 'IP:127.0.0.1,DNS:localhost');
  const p = (f: string) => join(dir, f);
  cached = {
    dir,
    caCert: p('ca.crt'),
    serverCert: p('server.crt'),
    serverKey: p('server.key'),
    clientCert: p('client.crt'),
    clientKey: p('client.key'),
    wrongHostCert: p('wronghost.crt'),
    wrongHostKey: p('wronghost.key'),
    expiredCert: p('expired.crt'),
    expiredKey: p('expired.key'),
    otherCaCert: p('other-ca.crt'),
    otherServerCert: p('other-server.crt'),
    otherServerKey: p('other-server.key'),
  };
  return cached;
}
