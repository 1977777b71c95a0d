import { readFileSync } from 'node:fs';
import { testPki, tlsTransport } from '@ticketing/test-support';
import { defineProtocolSuite } from './protocol-suite.js';

// The same black-box suite as over plain TCP, over TLS.
const pki = testPki();
defineProtocolSuite({
  transport: tlsTransport({ ca: readFileSync(pki.caCert) }),
  serverArgs: () => ['--tls-cert', pki.serverCert, '--tls-key', pki.serverKey],
});
