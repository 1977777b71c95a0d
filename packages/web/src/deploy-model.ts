/**
 * The deployment page's model: from what the operator filled in, every
 * node's config (validated with the server's own schema), systemd unit,
 * certificate commands, client snippets and the steps to follow. Pure, so
 * tests run it in Node and feed its configs to the real server.
 */
import { CONFIG_SCHEMA } from './config-schema.generated.js';
import { validate, type JsonSchema } from './json-schema.js';
import { toYaml, type YamlValue } from './yaml.js';

export interface NodeInput {
  readonly name: string;
  /** Client address HOST:PORT: what clients and peers connect to; the node listens on it. */
  readonly address: string;
  /** Admin HTTP listener HOST:PORT; '' for the server's default (127.0.0.1, client port + 4000); 'off' for none. */
  readonly http: string;
  readonly dataDir: string;
}

export type Mode = 'priority' | 'raft';

export interface DeployInput {
  /** In priority order: the first is preferred as the active node. */
  readonly nodes: readonly NodeInput[];
  readonly mode: Mode;
  /** Empty: clients need no token. */
  readonly clientTokens: readonly string[];
  /** Shared by the nodes of a cluster. */
  readonly peerToken: string;
  /** '' for none. */
  readonly httpToken: string;
  readonly tls: boolean;
  /** Where each node keeps ca.crt, NODE.crt and NODE.key. */
  readonly tlsDir: string;
  /** Limit keys of the schema (max-*) and their values; defaults are left out of the configs. */
  readonly limits: Readonly<Record<string, number>>;
  readonly logLevel: string;
  /** Where the Ticketing repository is installed on every host. */
  readonly installDir: string;
  /** Where each node keeps its secret files (default /etc/ticketing). */
  readonly secretsDir?: string;
}

/** A file holding secrets, installed beside the config (mode 640, group ticketing). */
export interface SecretFile {
  /** Download name. */
  readonly file: string;
  /** Where it goes on the node. */
  readonly path: string;
  readonly text: string;
}

export interface NodePlan {
  readonly name: string;
  readonly host: string;
  readonly config: Readonly<Record<string, YamlValue>>;
  readonly yaml: string;
  readonly unit: string;
  readonly configFile: string;
  readonly unitFile: string;
  /** Secrets in files of their own (the config names them): never on a command line. */
  readonly secrets: readonly SecretFile[];
}

export interface Step {
  readonly title: string;
  readonly text: string;
  readonly code?: string;
  /** Per-node steps name their node, so the page can offer its downloads there. */
  readonly node?: string;
}

export interface DeployPlan {
  /** Anything here makes the output unusable: the page offers no downloads. */
  readonly problems: readonly string[];
  readonly warnings: readonly string[];
  readonly tolerance: { readonly uninterrupted: boolean; readonly failures: number };
  readonly nodes: readonly NodePlan[];
  readonly openssl: string | undefined;
  readonly clients: { readonly typescript: string; readonly kotlin: string; readonly java: string };
  readonly steps: readonly Step[];
}

export const CONFIG_PATH = '/etc/ticketing/ticketing.yaml';
export const UNIT_PATH = '/etc/systemd/system/ticketing.service';

/** A secret for tokens: base64url of `bytes` (give 32 random bytes from Web Crypto). */
export function newSecret(bytes: Uint8Array): string {
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** The schema's limit keys (max-*) with their default, range and description, for the form. */
export function limitFields(schema: JsonSchema = CONFIG_SCHEMA): Array<{ key: string } & JsonSchema> {
  return Object.entries(schema.properties ?? {})
    .filter(([key, s]) => key.startsWith('max-') && s.type === 'integer')
    .map(([key, s]) => ({ key, ...s }));
}

/** The seed's table: priority mode keeps serving while one node lives; Raft needs a majority. */
export function tolerance(count: number, mode: Mode): { uninterrupted: boolean; failures: number } {
  const failures = count <= 1 ? 0 : mode === 'priority' ? count - 1 : Math.floor((count - 1) / 2);
  return { uninterrupted: failures > 0, failures };
}

export function hostOf(address: string): string {
  return address.slice(0, address.lastIndexOf(':')).replace(/^\[|\]$/g, '');
}

function portOf(address: string): string {
  return address.slice(address.lastIndexOf(':') + 1);
}

/** The server's default admin port is the client port + this (packages/server/src/http/admin-address.ts). */
export const ADMIN_PORT_OFFSET = 4000;

/** Where a node's admin listener will be, or undefined for none (off, or no default for its port). */
export function adminAddressOf(node: NodeInput): string | undefined {
  if (node.http === 'off') return undefined;
  if (node.http !== '') return node.http;
  const port = Number(portOf(node.address));
  if (!Number.isInteger(port) || port === 0 || port + ADMIN_PORT_OFFSET > 65_535) return undefined;
  return `127.0.0.1:${port + ADMIN_PORT_OFFSET}`;
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}

export function plan(input: DeployInput, schema: JsonSchema = CONFIG_SCHEMA): DeployPlan {
  const n = input.nodes.length;
  const cluster = n > 1;
  const problems = formProblems(input);
  const nodes = input.nodes.map((node) => {
    const config = nodeConfig(input, node, schema);
    for (const p of validate(schema, config)) problems.push(`${node.name || '(unnamed node)'}: ${p}`);
    return {
      name: node.name,
      host: hostOf(node.address),
      config,
      yaml: toYaml(config, [
        `Ticketing node ${node.name}: install as ${CONFIG_PATH} on ${hostOf(node.address)}.`,
        'Written by the Ticketing deployment page. The secrets are in the files it names (install them beside it, readable by root and the ticketing user only).',
      ]),
      unit: systemdUnit(input, node),
      configFile: `${node.name}.yaml`,
      unitFile: `${node.name}-ticketing.service`,
      secrets: secretFiles(input, node),
    };
  });
  const openssl = input.tls ? opensslCommands(input) : undefined;
  return {
    problems,
    warnings: warnings(input),
    tolerance: tolerance(n, input.mode),
    nodes,
    openssl,
    clients: clientSnippets(input),
    steps: steps(input, nodes, openssl, schema, cluster),
  };
}

/** Where a node's secret files go. */
function secretPath(input: DeployInput, name: 'peer.token' | 'client.tokens' | 'http.token'): string {
  return `${input.secretsDir ?? '/etc/ticketing'}/${name}`;
}

/** The secret files a node needs: the peer token (cluster), the client tokens, the admin token. */
function secretFiles(input: DeployInput, node: NodeInput): SecretFile[] {
  const files: SecretFile[] = [];
  // Named per node, as the config and unit files are: one download per node and file.
  if (input.nodes.length > 1) files.push({ file: `${node.name}-peer.token`, path: secretPath(input, 'peer.token'), text: `${input.peerToken}\n` });
  if (input.clientTokens.length > 0) files.push({ file: `${node.name}-client.tokens`, path: secretPath(input, 'client.tokens'), text: `${input.clientTokens.join('\n')}\n` });
  if (node.http !== 'off' && input.httpToken !== '') files.push({ file: `${node.name}-http.token`, path: secretPath(input, 'http.token'), text: `${input.httpToken}\n` });
  return files;
}

function nodeConfig(input: DeployInput, node: NodeInput, schema: JsonSchema): Record<string, YamlValue> {
  const c: Record<string, YamlValue> = { node: node.name, listen: node.address, 'data-dir': node.dataDir };
  if (input.nodes.length > 1) {
    c.peers = input.nodes.map((p) => `${p.name}=${p.address}`);
    c.mode = input.mode;
    c['peer-token-file'] = secretPath(input, 'peer.token');
  }
  if (input.clientTokens.length > 0) c['client-tokens-file'] = secretPath(input, 'client.tokens');
  if (input.tls) {
    c['tls-cert'] = `${input.tlsDir}/${node.name}.crt`;
    c['tls-key'] = `${input.tlsDir}/${node.name}.key`;
    c['tls-ca'] = `${input.tlsDir}/ca.crt`;
  }
  // '' leaves the server's default (on, loopback, client port + 4000).
  if (node.http !== '') c.http = node.http;
  if (node.http !== 'off' && input.httpToken !== '') c['http-token-file'] = secretPath(input, 'http.token');
  for (const [key, value] of Object.entries(input.limits)) {
    if (value !== schema.properties?.[key]?.default) c[key] = value;
  }
  if (input.logLevel !== schema.properties?.['log-level']?.default) c['log-level'] = input.logLevel;
  return c;
}

/** What the schema cannot see: how the nodes fit together. */
function formProblems(input: DeployInput): string[] {
  const problems: string[] = [];
  if (input.nodes.length === 0) problems.push('add at least one node');
  const dup = (what: string, values: string[]) => {
    const seen = values.find((v, i) => v !== '' && values.indexOf(v) !== i);
    if (seen !== undefined) problems.push(`two nodes have the same ${what}: ${seen}`);
  };
  dup('name', input.nodes.map((x) => x.name));
  dup('client address', input.nodes.map((x) => x.address));
  // Nodes on one host (a test setup) must not share ports or data.
  const sameHost = (f: (x: NodeInput) => string) => input.nodes.map((x) => (f(x) === '' ? '' : `${hostOf(x.address)} ${f(x)}`));
  dup('admin listener on one host', sameHost((x) => adminAddressOf(x) ?? ''));
  dup('data directory on one host', sameHost((x) => x.dataDir));
  for (const x of input.nodes) {
    // A cluster node also takes its client port + 1: the peer port.
    const peerPortOf = input.nodes.find((y) => input.nodes.length > 1 && y !== x && hostOf(y.address) === hostOf(x.address) && Number(portOf(y.address)) + 1 === Number(portOf(x.address)));
    if (peerPortOf !== undefined) problems.push(`${x.name}: its client port is the peer port of ${peerPortOf.name} (client port + 1) on the same host`);
    if (!x.dataDir.startsWith('/')) problems.push(`${x.name}: the data directory must be an absolute path (the systemd unit needs one)`);
    if (input.nodes.length > 1 && (portOf(x.address) === '0' || ['0.0.0.0', '::'].includes(hostOf(x.address)))) {
      problems.push(`${x.name}: in a cluster the client address must be one that clients and peers can reach (no port 0, no 0.0.0.0)`);
    }
  }
  if (input.mode === 'priority' && input.nodes.length > 16) problems.push('a priority cluster has at most 16 nodes');
  if (input.tls && !input.tlsDir.startsWith('/')) problems.push('the TLS directory must be an absolute path');
  if (input.secretsDir !== undefined && !input.secretsDir.startsWith('/')) problems.push('the secret files directory must be an absolute path');
  // The secrets go to files, not the configs: check them as the server will.
  const secrets: Record<string, YamlValue> = { 'client-tokens': [...input.clientTokens] };
  if (input.nodes.length > 1) secrets['peer-token'] = input.peerToken;
  if (input.httpToken !== '') secrets['http-token'] = input.httpToken;
  problems.push(...validate(CONFIG_SCHEMA, secrets));
  if (!input.installDir.startsWith('/')) problems.push('the install directory must be an absolute path');
  return problems;
}

function warnings(input: DeployInput): string[] {
  const n = input.nodes.length;
  const w: string[] = [];
  if (n === 1) w.push('One node: no uninterrupted service. A restart interrupts clients briefly and tolerates no failure; 2 nodes are the smallest uninterrupted setup.');
  if (n >= 4) w.push(`${n} nodes: only the propagation cost grows; not recommended (2 or 3 nodes are enough for most cases).`);
  if (input.mode === 'raft' && n === 2) {
    w.push('A 2-node Raft cluster tolerates no failure: Raft needs a majority, and the majority of 2 is 2, so losing either node stops service. Use 3 nodes, or priority mode.');
  }
  if (input.mode === 'raft' && n >= 4 && n % 2 === 0) w.push(`Raft with ${n} nodes tolerates no more failures than with ${n - 1}: use an odd number of nodes.`);
  if (input.mode === 'priority' && n >= 2) {
    w.push('Priority mode is not consensus: during a failover or a network partition two nodes can briefly grant the same key. Have the protected resource reject stale fencing tokens.');
  }
  const exposed = input.nodes.some((x) => !isLoopback(hostOf(x.address)));
  if (exposed && input.clientTokens.length === 0) w.push('No client tokens: any program that reaches a client address can take and release every lock.');
  if (exposed && !input.tls && input.clientTokens.length > 0) w.push('Without TLS, client tokens cross the network in clear text.');
  if (input.nodes.some((x) => { const a = adminAddressOf(x); return a !== undefined && !isLoopback(hostOf(a)); }) && input.httpToken === '') {
    w.push('An admin listener is not on loopback and has no admin token: anyone who reaches it can read status and metrics. Keep it on 127.0.0.1 or set a token.');
  }
  return w;
}

function systemdUnit(input: DeployInput, node: NodeInput): string {
  return `# ${UNIT_PATH} on ${hostOf(node.address)} (node ${node.name})
[Unit]
Description=Ticketing lock server (node ${node.name})
After=network-online.target
Wants=network-online.target

[Service]
Type=exec
User=ticketing
Group=ticketing
ExecStart=${input.installDir}/bin/ticketing server --config ${CONFIG_PATH}
# SIGHUP reloads client tokens and limits; SIGTERM hands off and stops.
ExecReload=/bin/kill -HUP $MAINPID
KillSignal=SIGTERM
TimeoutStopSec=20
Restart=on-failure
RestartSec=2
# Exit code 2 is a bad configuration: restarting cannot help.
RestartPreventExitStatus=2
LimitNOFILE=65536
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
ReadWritePaths=${node.dataDir}

[Install]
WantedBy=multi-user.target
`;
}

/** A subjectAltName entry for a host: an IP address or a DNS name. */
function san(host: string): string {
  return /^[\d.]+$/.test(host) || host.includes(':') ? `IP:${host}` : `DNS:${host}`;
}

function opensslCommands(input: DeployInput): string {
  const lines = [
    '# Run once, on a trusted machine, in an empty directory (OpenSSL 1.1.1 or 3.x).',
    '# Keep ca.key offline: it can make certificates every node and client trusts.',
    'set -eu',
    "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 -subj '/CN=Ticketing CA' -keyout ca.key -out ca.crt",
  ];
  for (const node of input.nodes) {
    const n = node.name;
    lines.push(
      '',
      `# ${n} (${node.address})`,
      // The node name too: peers accept a certificate of this CA only if it names the node (DNS:<name>).
      `printf 'basicConstraints=critical,CA:FALSE\\nkeyUsage=critical,digitalSignature\\nextendedKeyUsage=serverAuth,clientAuth\\nsubjectAltName=${[...new Set([san(hostOf(node.address)), `DNS:${n}`])].join(',')}\\n' > ${n}.ext`,
      `openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj '/CN=${n}' -keyout ${n}.key -out ${n}.csr`,
      `openssl x509 -req -in ${n}.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 825 -extfile ${n}.ext -out ${n}.crt`,
      `openssl verify -CAfile ca.crt ${n}.crt`,
    );
  }
  return `${lines.join('\n')}\n`;
}

function clientSnippets(input: DeployInput): DeployPlan['clients'] {
  const addrs = input.nodes.map((x) => JSON.stringify(x.address));
  const token = input.clientTokens.length > 0;
  const ts = [
    "import { TicketBroker } from '@ticketing/client';",
    '',
    `const broker = TicketBroker.connect([${input.nodes.map((x) => `'${x.address}'`).join(', ')}], {`,
    ...(token ? ['  token: process.env.TICKETING_TOKEN, // one of the client tokens'] : []),
    ...(input.tls ? ["  tls: { ca: 'ca.crt' }, // the cluster's CA certificate"] : []),
    '});',
    'await broker.waitReady(5_000);',
  ];
  const builder = (tls: string, semicolon: string) => [
    'TicketBroker.builder()',
    `    .addrs(${addrs.join(', ')})`,
    ...(token ? ['    .token(System.getenv("TICKETING_TOKEN")) // one of the client tokens'] : []),
    ...(input.tls ? [`    .tls(${tls}) // the cluster's CA certificate`] : []),
    `    .connect()${semicolon}`,
  ];
  const imports = (semicolon: string) => [
    `import io.ticketing.client.TicketBroker${semicolon}`,
    ...(input.tls ? [`import io.ticketing.client.TlsMode${semicolon}`] : []),
    `import java.time.Duration${semicolon}`,
    '',
  ];
  const kotlin = [...imports(''), `val broker = ${builder('TlsMode.Ca("ca.crt")', '').join('\n')}`, 'broker.waitReadyBlocking(Duration.ofSeconds(5)) // or waitReady(...) in a coroutine'];
  const java = [...imports(';'), `TicketBroker broker = ${builder('TlsMode.ca("ca.crt")', ';').join('\n')}`, 'broker.waitReadyBlocking(Duration.ofSeconds(5));'];
  return { typescript: `${ts.join('\n')}\n`, kotlin: `${kotlin.join('\n')}\n`, java: `${java.join('\n')}\n` };
}

function steps(input: DeployInput, nodes: readonly NodePlan[], openssl: string | undefined, schema: JsonSchema, cluster: boolean): Step[] {
  const dir = input.installDir;
  const out: Step[] = [
    {
      title: 'Prepare every host',
      text: `Install Node.js 22 or 24 (the LTS lines Ticketing supports), then Ticketing itself into ${dir} from the release's npm package (no repository and no registry needed); or copy the release's single executable to ${dir}/bin/ticketing instead of both. Then, on each host:`,
      code: [
        `sudo npm install --global --prefix ${dir} ./ticketing-<version>.tgz && ${dir}/bin/ticketing --version`,
        'sudo useradd --system --no-create-home --shell /usr/sbin/nologin ticketing',
        `sudo mkdir -p /etc/ticketing${input.tls ? ` ${input.tlsDir}` : ''}`,
      ].join('\n'),
    },
  ];
  if (openssl !== undefined) {
    out.push({
      title: 'Make the certificates',
      text: `Once, on a trusted machine: these commands make a CA and one certificate per node. Copy ca.crt and each node's NODE.crt and NODE.key to ${input.tlsDir} on that node, and ca.crt to every client.`,
      code: openssl,
    });
  }
  const ports = (offset: number) => [...new Set(input.nodes.map((x) => String(Number(portOf(x.address)) + offset)))].join(', ');
  for (const [i, node] of nodes.entries()) {
    const x = input.nodes[i]!;
    const tlsFiles = input.tls
      ? [
          `sudo install -m 644 ca.crt ${node.name}.crt ${input.tlsDir}/`,
          `sudo install -m 640 -g ticketing ${node.name}.key ${input.tlsDir}/`,
        ]
      : [];
    out.push({
      node: node.name,
      title: `On ${node.host}: node ${node.name}`,
      text: `Download ${[node.configFile, node.unitFile, ...node.secrets.map((f) => f.file)].join(', ')}, copy them to ${node.host}, then run there:`,
      code: [
        `sudo mkdir -p ${x.dataDir} && sudo chown ticketing:ticketing ${x.dataDir}`,
        `sudo install -m 640 -g ticketing ${node.configFile} ${CONFIG_PATH}`,
        ...node.secrets.map((f) => `sudo install -m 640 -g ticketing ${f.file} ${f.path}`),
        ...tlsFiles,
        `sudo install -m 644 ${node.unitFile} ${UNIT_PATH}`,
        'sudo systemctl daemon-reload && sudo systemctl enable --now ticketing',
        `journalctl -u ticketing -o cat | grep -m1 '^ready'   # ready role=... node=${node.name} ...`,
      ].join('\n'),
    });
  }
  if (cluster) {
    // A server that knows peer-listen links its nodes on the client port + 1 (docs/cluster.md).
    const peerPort = schema.properties?.['peer-listen'] === undefined ? '' : ` The nodes also connect to each other on the peer port, client port + 1 (TCP ${ports(1)}): open it between the nodes only.`;
    out.push({ title: 'Open the firewall', text: `Clients connect to TCP port ${ports(0)} on every node.${peerPort}` });
  }
  const withHttp = input.nodes.flatMap((x) => { const http = adminAddressOf(x); return http === undefined ? [] : [{ ...x, http }]; });
  if (withHttp.length > 0) {
    // The admin token comes from its file, never from a command line (ps shows arguments to every user).
    const tokenFile = secretPath(input, 'http.token');
    const curl = (url: string) => (input.httpToken === '' ? `curl -s ${url}` : `sudo sed 's/^/Authorization: Bearer /' ${tokenFile} | curl -s -H @- ${url}`);
    const env = input.httpToken === '' ? '' : `TICKETING_HTTP_TOKEN="$(sudo cat ${tokenFile})" `;
    out.push({
      title: 'Check the nodes',
      text:
        'On each host, ask its admin listener. The node that serves clients answers "ready"; in a cluster the others answer "not ready" ' +
        '(HTTP 503, role standby or follower) while it serves. `ticketing status` prints the node, its peers, roles, locks and waiters. ' +
        'The live dashboard is the admin address in a browser (an SSH tunnel reaches a loopback one).',
      code: withHttp
        .flatMap((x) => [`# on ${hostOf(x.address)}`, curl(`http://${x.http}/readyz`), `${env}${dir}/bin/ticketing status${x.http === '127.0.0.1:9225' ? '' : ` --addr ${x.http}`}`])
        .join('\n'),
    });
  }
  const give = [
    'all the client addresses (in any order)',
    ...(input.clientTokens.length > 0 ? ['one of the client tokens, kept out of the code (below: the TICKETING_TOKEN environment variable)'] : []),
    ...(input.tls ? ['the CA certificate ca.crt'] : []),
  ];
  out.push({ title: 'Connect the applications', text: `Give every client ${give.join(', and ')}. The snippets below do.` });
  return out;
}
