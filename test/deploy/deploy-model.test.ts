/**
 * The deployment page's model, in Node: its validator agrees with the
 * server's zod schema, its YAML reads back as written, and its plans carry
 * the seed's warnings, working client snippets and certificate commands.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { CONFIG_KEYS, configSchema, loadConfig } from '@ticketing/server';
import { CONFIG_SCHEMA } from '../../packages/web/src/config-schema.generated.js';
import { newSecret, plan, tolerance } from '../../packages/web/src/deploy-model.js';
import { validate } from '../../packages/web/src/json-schema.js';
import { toYaml } from '../../packages/web/src/yaml.js';
import { tempDir } from '@ticketing/test-support';
import { installSecrets, localInput, PEER_TOKEN_ONE } from './model.js';

const LIST_KEYS = new Set(['peers', 'client-tokens', 'http-hosts']);
const keysOfType = (type: string) => new Set<string>(CONFIG_KEYS.filter((k) => CONFIG_SCHEMA.properties?.[k]?.type === type));
const INT_KEYS = keysOfType('integer');
const BOOLEAN_KEYS = keysOfType('boolean');

describe('the generated JSON Schema', () => {
  const port = fc.oneof(fc.integer({ min: 0, max: 70_000 }).map(String), fc.constantFrom('0', '65535', '65536', '05225', '000001', '', '-1', '1e3', '99999', '00000'));
  const host = fc.constantFrom('127.0.0.1', '[::1]', '[fe80::1%eth0]', 'lock-1.example', '', 'a b', '[zz]', 'h:x');
  const hostPort = fc.tuple(host, port).map(([h, p]) => `${h}:${p}`);
  const name = fc.oneof(fc.constantFrom('lock-1', 'a', '-x', 'A.b_c', 'x'.repeat(63), 'x'.repeat(64)), fc.string({ maxLength: 5 }));
  const text = fc.oneof(
    hostPort,
    name,
    fc.tuple(name, hostPort).map(([n, hp]) => `${n}=${hp}`),
    fc.constantFrom('priority', 'raft', 'info', 'debug', 'verbose', 'true', 'false', '12', 'a,b', ''),
    fc.string({ maxLength: 8, unit: 'binary' }),
  );
  const value = fc.oneof(text, fc.integer({ min: -5, max: 2_000_000_000 }), fc.double(), fc.boolean(), fc.array(text, { maxLength: 3 }), fc.constant(null));
  const config = fc.dictionary(fc.constantFrom<string>(...CONFIG_KEYS, 'bogus'), value, { maxKeys: 4 });

  /** Values zod converts first (flag strings): the JSON Schema may be stricter there, never looser. */
  const preprocessed = (c: Record<string, unknown>) =>
    Object.entries(c).some(
      ([k, v]) => typeof v === 'string' && ((INT_KEYS.has(k) && /^\d+$/.test(v)) || (BOOLEAN_KEYS.has(k) && ['true', 'false'].includes(v)) || LIST_KEYS.has(k)),
    );

  it('accepts exactly what the server schema accepts', () => {
    fc.assert(
      fc.property(config, (c) => {
        const jsonOk = validate(CONFIG_SCHEMA, c).length === 0;
        const zodOk = configSchema.safeParse(c).success;
        if (preprocessed(c)) return !jsonOk || zodOk;
        return jsonOk === zodOk;
      }),
      { numRuns: 5_000 },
    );
  });

  it('names the key and the reason in each problem', () => {
    expect(validate(CONFIG_SCHEMA, { 'max-locks': 0, mode: 'paxos', listen: 'x:70000', nope: 1 })).toEqual([
      'max-locks: must be from 1 to 100000000',
      'mode: must be one of priority, raft',
      'listen: "x:70000" is not of the allowed form',
      'nope: is not a known key',
    ]);
  });
});

describe('toYaml', () => {
  it('reads back as written, whatever the strings hold', () => {
    const str = fc.string({ minLength: 1, maxLength: 12, unit: 'grapheme' });
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom('a', 'b-c', 'd'), fc.oneof(str, fc.integer(), fc.boolean(), fc.array(str, { maxLength: 3 }))), (c) => {
        expect(parseYaml(toYaml(c, ['a comment: with # and "quotes"']))).toEqual(Object.keys(c).length === 0 ? null : c);
      }),
      { numRuns: 2_000 },
    );
  });
});

describe('plan', () => {
  const dir = tempDir('ticketing-deploy-');

  it('makes one valid config per node that the server loads as given', () => {
    const p = plan(localInput([15225, 15227], [19225, 19226], dir, { httpToken: 'admin-tok', limits: { 'max-conns': 500 } }));
    expect(p.problems).toEqual([]);
    expect(p.nodes.map((n) => n.name)).toEqual(['lock-1', 'lock-2']);
    for (const node of p.nodes) {
      const file = join(dir, node.configFile);
      writeFileSync(file, node.yaml);
      installSecrets(node);
      // Secrets live in files of their own, never in the config (nor on a command line).
      expect(node.yaml).not.toMatch(new RegExp(`client-token-one|${PEER_TOKEN_ONE}|admin-tok`));
      const loaded = loadConfig({}, file);
      expect(loaded.clientIdentities.map((e) => e.token)).toEqual(['client-token-one']);
      expect(loaded).toMatchObject({
        node: node.name,
        peers: ['lock-1=127.0.0.1:15225', 'lock-2=127.0.0.1:15227'],
        mode: 'priority',
        'peer-token': PEER_TOKEN_ONE,
        'http-token': 'admin-tok',
        'max-conns': 500,
        'max-locks': 1_000_000,
      });
      expect(node.yaml).not.toContain('max-locks'); // defaults are left out
      expect(node.unit).toContain(`ExecStart=/opt/ticketing/bin/ticketing server --config /etc/ticketing/ticketing.yaml`);
      expect(node.unit).toContain(`ReadWritePaths=${dir}/${node.name}`);
    }
  });

  it('makes a single node without cluster keys', () => {
    const p = plan(localInput([15225], [], dir));
    expect(p.problems).toEqual([]);
    expect(Object.keys(p.nodes[0]!.config)).toEqual(['node', 'listen', 'data-dir', 'client-tokens-file']);
  });

  it("follows the seed's table: tolerated failures and warnings", () => {
    expect([1, 2, 3, 4, 5].map((n) => tolerance(n, 'priority'))).toEqual([
      { uninterrupted: false, failures: 0 },
      { uninterrupted: true, failures: 1 },
      { uninterrupted: true, failures: 2 },
      { uninterrupted: true, failures: 3 },
      { uninterrupted: true, failures: 4 },
    ]);
    expect([2, 3, 4, 5].map((n) => tolerance(n, 'raft').failures)).toEqual([0, 1, 1, 2]);
    const warningsFor = (count: number, mode: 'priority' | 'raft') =>
      plan(localInput([...Array(count).keys()].map((i) => 15000 + 2 * i), [], dir, { mode })).warnings.join('\n');
    expect(warningsFor(1, 'priority')).toMatch(/One node: no uninterrupted service/);
    expect(warningsFor(2, 'priority')).not.toMatch(/propagation|tolerates no failure/);
    expect(warningsFor(4, 'priority')).toMatch(/4 nodes: only the propagation cost grows; not recommended/);
    expect(warningsFor(2, 'raft')).toMatch(/A 2-node Raft cluster tolerates no failure/);
    expect(warningsFor(3, 'raft')).toBe('');
    expect(warningsFor(4, 'raft')).toMatch(/Raft with 4 nodes tolerates no more failures than with 3/);
  });

  it('tells which ports to open: client ports, and the peer ports (client port + 1)', () => {
    const firewall = plan(localInput([5225, 6000], [], dir)).steps.find((x) => x.title === 'Open the firewall')!;
    expect(firewall.text).toBe('Clients connect to TCP port 5225, 6000 on every node. The nodes also connect to each other on the peer port, client port + 1 (TCP 5226, 6001): open it between the nodes only.');
    expect(plan(localInput([5225], [], dir)).steps.map((x) => x.title)).not.toContain('Open the firewall');
  });

  it('refuses what cannot work, before any download', () => {
    const seventeen = localInput([...Array(17).keys()].map((i) => 20000 + 2 * i), [], dir);
    expect(plan(seventeen).problems).toEqual(['a priority cluster has at most 16 nodes']);
    const base = localInput([15225, 15227], [19225, 19225], dir);
    const problems = plan({
      ...base,
      nodes: [{ ...base.nodes[0]!, dataDir: 'relative' }, { ...base.nodes[1]!, name: 'lock-1', address: '127.0.0.1:0' }],
    }).problems.join('\n');
    expect(problems).toMatch(/two nodes have the same name: lock-1/);
    expect(problems).toMatch(/two nodes have the same admin listener on one host/);
    expect(problems).toMatch(/data directory must be an absolute path/);
    expect(problems).toMatch(/no port 0/);
    expect(plan({ ...base, nodes: [{ ...base.nodes[0]!, address: '127.0.0.1:70000' }] }).problems).toEqual([
      'lock-1: listen: "127.0.0.1:70000" is not of the allowed form',
    ]);
    expect(plan(localInput([15225, 15226], [], dir)).problems).toEqual(['lock-2: its client port is the peer port of lock-1 (client port + 1) on the same host']);
    expect(plan({ ...base, clientTokens: ['has space'] }).problems.join('\n')).toMatch(/client-tokens\[0\]: "has space" is not of the allowed form/);
  });

  it('warns about open listeners: no tokens, tokens without TLS, an exposed admin listener without a token', () => {
    const input = localInput([15225, 15227], [], dir);
    const remote = { ...input, nodes: input.nodes.map((n, i) => ({ ...n, address: `10.0.0.${i + 1}:5225`, http: `10.0.0.${i + 1}:9225` })) };
    expect(plan({ ...remote, clientTokens: [] }).warnings.join('\n')).toMatch(/No client tokens/);
    expect(plan(remote).warnings.join('\n')).toMatch(/Without TLS, client tokens cross the network in clear text/);
    expect(plan(remote).warnings.join('\n')).toMatch(/admin listener is not on loopback and has no admin token/);
    expect(plan({ ...remote, tls: true, httpToken: 'x' }).warnings.join('\n')).not.toMatch(/clear text|admin token/);
  });

  it('writes client snippets for this cluster in the clients’ own API', () => {
    const input = localInput([15225, 15227], [], dir, { tls: true });
    const { typescript, kotlin, java } = plan(input).clients;
    expect(typescript).toContain("TicketBroker.connect(['127.0.0.1:15225', '127.0.0.1:15227'], {");
    expect(typescript).toContain('token: process.env.TICKETING_TOKEN');
    expect(typescript).toContain("tls: { ca: 'ca.crt' }");
    expect(kotlin).toContain('.addrs("127.0.0.1:15225", "127.0.0.1:15227")');
    expect(kotlin).toContain('.tls(TlsMode.Ca("ca.crt"))');
    expect(kotlin).toContain('.token(System.getenv("TICKETING_TOKEN"))');
    expect(java).toContain('.tls(TlsMode.ca("ca.crt"))');
    expect(java).toMatch(/\.connect\(\);\nbroker\.waitReadyBlocking\(Duration\.ofSeconds\(5\)\);/);
    const plain = plan({ ...input, tls: false, clientTokens: [] }).clients;
    for (const snippet of Object.values(plain)) expect(snippet).not.toMatch(/tls|TlsMode|token/i);
  });

  it('makes secrets that fit a token: 32 random bytes as base64url', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), (bytes) => {
        const s = newSecret(bytes);
        expect(s).toBe(Buffer.from(bytes).toString('base64url'));
        expect(validate(CONFIG_SCHEMA, { 'client-tokens': [s], 'peer-token': s, 'http-token': s })).toEqual([]);
      }),
    );
  });

  it("writes openssl commands that make a CA and node certificates with the nodes' addresses", () => {
    const input = localInput([15225, 15227], [], dir, { tls: true });
    const p = plan({ ...input, nodes: [input.nodes[0]!, { ...input.nodes[1]!, address: 'lock-2.example:5225' }] });
    const certs = tempDir('ticketing-certs-');
    const run = spawnSync('bash', ['-c', p.openssl!], { cwd: certs, encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toBe('lock-1.crt: OK\nlock-2.crt: OK\n');
    const text = (file: string) => spawnSync('openssl', ['x509', '-noout', '-text', '-in', join(certs, file)], { encoding: 'utf8' }).stdout;
    expect(text('lock-1.crt')).toContain('IP Address:127.0.0.1');
    expect(text('lock-2.crt')).toContain('DNS:lock-2.example');
    expect(text('lock-1.crt')).toContain('CA:FALSE');
    expect(text('ca.crt')).toContain('CA:TRUE');
    expect(readFileSync(join(certs, 'lock-1.key'), 'utf8')).toContain('PRIVATE KEY');
    expect(p.nodes[0]!.config).toMatchObject({ 'tls-cert': '/etc/ticketing/tls/lock-1.crt', 'tls-key': '/etc/ticketing/tls/lock-1.key', 'tls-ca': '/etc/ticketing/tls/ca.crt' });
  });
});
