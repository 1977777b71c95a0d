/**
 * `ticketing verify` end to end: against the real server (linearizable),
 * against a fake lock that grants every acquire (anomalies found), with
 * client tokens, TLS and a history file, and its usage errors.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { check, operationFromJson } from '@ticketing/checker';
import { FakeServer, grantEverything, runCli, type RunningServer, startServer, tempDir, testPki } from '@ticketing/test-support';

let server: RunningServer | undefined;
let fake: FakeServer | undefined;
afterEach(async () => {
  await server?.stop();
  await fake?.close();
  server = undefined;
  fake = undefined;
});

async function verify(args: string[]) {
  return runCli(['verify', ...args], 30_000);
}

describe('ticketing verify', () => {
  it('finds the real server linearizable', async () => {
    server = await startServer();
    const r = await verify(['--addr', server.address, '--duration', '3']);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/^verify: 10 clients, 5 keys, 3 s against 127\.0\.0\.1:\d+ \(seed \d+\)$/m);
    expect(r.stdout).toMatch(/^ {2}acquire +\d+ +granted [1-9]\d*, timeout \d+, busy 0, unknown 0$/m);
    expect(r.stdout).toMatch(/^anomalies: none$/m);
    expect(r.stdout).toMatch(/^verdict: linearizable$/m);
    expect(r.code).toBe(0);
  });

  it('finds two holders at once on a lock that grants every acquire, and exits 1', async () => {
    fake = await FakeServer.start(grantEverything(), { allowHalfOpen: false });
    const r = await verify(['--addr', fake.address, '--duration', '2', '--clients', '4', '--keys', '1']);
    expect(r.stdout).toMatch(/^ {2}1\. double-grant on key ticketing-verify\/[0-9a-f]{8}\/0: granted while token \d+ still held the key/m);
    // The evidence: both grants, with their clients and times.
    expect(r.stdout).toMatch(/^ {7}client \d: acquire ticketing-verify\/[0-9a-f]{8}\/0 wait \d s lease \d s -> granted \d+ {2}\[[\d.]+ \.\. [\d.]+ ms\]$/m);
    expect(r.stdout).toMatch(/^verdict: NOT linearizable \(\d+ anomal(y|ies)\)$/m);
    expect(r.code).toBe(1);
  });

  it('sends the client token, speaks TLS, and writes a history that checks the same', async () => {
    const pki = testPki();
    server = await startServer(['--client-tokens', 'sekret', '--tls-cert', pki.serverCert, '--tls-key', pki.serverKey]);
    const file = join(tempDir('ticketing-verify-'), 'history.jsonl');
    const r = await verify(['--addr', server.address, '--duration', '1', '--token', 'sekret', '--tls-ca', pki.caCert, '--history', file, '--seed', '7']);
    expect(r.stdout).toMatch(/\(seed 7\)/);
    expect(r.stdout).toMatch(/^verdict: linearizable$/m);
    expect(r.code).toBe(0);
    const history = readFileSync(file, 'utf8').trimEnd().split('\n').map(operationFromJson);
    expect(r.stdout).toContain(`operations: ${history.length}\n`);
    expect(history.some((op) => op.outcome === 'granted')).toBe(true);
    expect(check(history).ok).toBe(true);

    const wrongToken = await verify(['--addr', server.address, '--duration', '1', '--token', 'nope', '--tls-ca', pki.caCert]);
    expect(wrongToken.stderr).toMatch(/^ticketing verify: cannot reach a serving node \(127\.0\.0\.1:\d+: E auth [^\n]*\)\n$/);
    expect(wrongToken.code).toBe(2);
  });

  it('rejects bad usage with one line and exit 2', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['--addr', 'nowhere', '--duration', '1'], /^ticketing verify: --addr must be host:port\[,host:port\.\.\.\] \(got "nowhere"\)\n$/],
      [['--addr', '127.0.0.1:1', '--duration', '601'], /^ticketing verify: --duration must be a whole number 1\.\.600 \(got "601"\)\n$/],
      [['--addr', '127.0.0.1:1', '--clients', '0'], /^ticketing verify: --clients must be a whole number 1\.\.1000 \(got "0"\)\n$/],
      [['--addr', '127.0.0.1:1', '--tls-ca', '/nonexistent.pem'], /^ticketing verify: --tls-ca: no such file: \/nonexistent\.pem\n$/],
      [['--addr', '127.0.0.1:1', '--duration', '1'], /^ticketing verify: cannot reach a serving node \(127\.0\.0\.1:1: ECONNREFUSED\)\n$/],
    ];
    for (const [args, stderr] of cases) {
      const r = await verify(args);
      expect(r.stderr, args.join(' ')).toMatch(stderr);
      expect(r.stdout).toBe('');
      expect(r.code).toBe(2);
    }
  });
});
