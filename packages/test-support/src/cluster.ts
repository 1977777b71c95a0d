/**
 * Real multi-node clusters on loopback for tests. Optionally every link
 * between two nodes goes through a TcpProxy pair the test controls (one pair
 * per direction), so links can be cut to partition the cluster.
 */
import { startServer, tempDir, type RunningServer } from './server.js';
import { TcpProxy, type CutMode } from './proxy.js';
import { clockRateEnv } from './clock.js';
import { freePortPairs } from './ports.js';
import { Wire } from './wire.js';

/** The peer token test clusters use when a test gives none. */
export const TEST_PEER_TOKEN = 'test-cluster-peer-token';

export interface NodeHandle {
  readonly name: string;
  readonly port: number;
  server: RunningServer | undefined;
}

/** The parts of a node's /status the tests read. */
export interface NodeStatusJson {
  readonly role: string;
  readonly uptimeMs: number;
  readonly locks: { readonly held: number; readonly waiting: number };
}

export interface ClusterOptions {
  /** Route node-to-node links through proxies (needed to partition). */
  readonly proxied?: boolean;
  /** Keep state in a data directory per node instead of --memory. */
  readonly dataDirs?: boolean;
  readonly extraArgs?: string[];
  /** The client token to greet nodes with (when they require one). */
  readonly clientToken?: string;
  /** Nodes whose clocks run at another rate than real time (libfaketime), by name. */
  readonly clockRates?: Readonly<Record<string, number>>;
  /** The admin token the nodes require (--http-token in extraArgs): status() sends it. */
  readonly httpToken?: string;
}

export class TestCluster {
  /** proxies[i][j]: what node i uses to reach node j (client port, peer port). */
  private readonly proxies = new Map<string, [TcpProxy, TcpProxy]>();
  private readonly dirs = new Map<string, string>();

  private constructor(
    readonly nodes: NodeHandle[],
    private readonly options: ClusterOptions,
  ) {}

  static async create(names: string[], options: ClusterOptions = {}): Promise<TestCluster> {
    // One call for every port, so no two nodes or proxies are handed the same pair.
    const proxyCount = options.proxied === true ? names.length * (names.length - 1) : 0;
    const ports = await freePortPairs(names.length + proxyCount);
    const nodes: NodeHandle[] = names.map((name) => ({ name, port: ports.shift()!, server: undefined }));
    const cluster = new TestCluster(nodes, options);
    if (options.proxied === true) {
      for (const from of nodes) {
        for (const to of nodes) {
          if (from === to) continue;
          const base = ports.shift()!;
          const pair: [TcpProxy, TcpProxy] = [await TcpProxy.start(to.port, { port: base }), await TcpProxy.start(to.port + 1, { port: base + 1 })];
          cluster.proxies.set(`${from.name}>${to.name}`, pair);
        }
      }
    }
    for (const n of nodes) if (options.dataDirs === true) cluster.dirs.set(n.name, tempDir(`ticketing-${n.name}-`));
    return cluster;
  }

  node(name: string): NodeHandle {
    const n = this.nodes.find((x) => x.name === name);
    if (n === undefined) throw new Error(`no node ${name}`);
    return n;
  }

  dataDir(name: string): string {
    const d = this.dirs.get(name);
    if (d === undefined) throw new Error(`${name} has no data directory (create the cluster with dataDirs)`);
    return d;
  }

  /** The peers flag as node `self` sees the cluster (through its proxies when proxied). */
  peersFor(self: NodeHandle): string {
    return this.nodes
      .map((n) => {
        const pair = this.proxies.get(`${self.name}>${n.name}`);
        return `${n.name}=127.0.0.1:${n === self || pair === undefined ? n.port : pair[0].port}`;
      })
      .join(',');
  }

  /** Starts node `name`; `peers` replaces the peers list it would get (a misconfigured node). */
  async start(name: string, extra: string[] = [], peers?: string): Promise<RunningServer> {
    const n = this.node(name);
    // A cluster refuses to start without peer authentication: tests use a peer token unless they bring their own.
    const given = [...(this.options.extraArgs ?? []), ...extra];
    const secured = given.some((a) => a === '--peer-token' || a === '--peer-token-file' || a === '--tls-cert' || a === '--insecure-peers');
    const storage = this.options.dataDirs === true ? ['--data-dir', this.dirs.get(name)!] : ['--memory'];
    const rate = this.options.clockRates?.[name];
    n.server = await startServer(
      ['--listen', `127.0.0.1:${n.port}`, '--node', name, '--peers', peers ?? this.peersFor(n), ...storage, ...(secured ? [] : ['--peer-token', TEST_PEER_TOKEN]), ...given],
      { memory: false, ...(rate === undefined ? {} : { env: clockRateEnv(rate) }) },
    );
    return n.server;
  }

  async startAll(): Promise<void> {
    for (const n of this.nodes) await this.start(n.name);
  }

  async kill(name: string, signal: NodeJS.Signals = 'SIGKILL'): Promise<number | string | undefined> {
    const n = this.node(name);
    const code = await n.server?.stop(signal);
    n.server = undefined;
    return code;
  }

  /** The proxies (client port, peer port) that node `from` uses to reach node `to` (the cluster must be proxied). */
  linksBetween(from: string, to: string): readonly [TcpProxy, TcpProxy] {
    const pair = this.proxies.get(`${from}>${to}`);
    if (pair === undefined) throw new Error(`no proxied links ${from}>${to} (create the cluster with proxied)`);
    return pair;
  }

  /**
   * Cuts every link between the two groups, both directions: connections are
   * closed (`mode`: destroy, FIN or RST) and new ones refused until heal().
   */
  partition(a: string[], b: string[], mode: CutMode = 'destroy'): void {
    for (const [from, to] of this.crossing(a, b)) for (const p of this.linksBetween(from, to)) p.cut(mode);
  }

  /**
   * A silent partition between the two groups: nothing passes, nothing is
   * closed (no FIN, no RST), until heal(); see TcpProxy.blackHole.
   */
  blackHole(a: string[], b: string[]): void {
    for (const [from, to] of this.crossing(a, b)) for (const p of this.linksBetween(from, to)) p.blackHole();
  }

  /**
   * A one-way partition: nothing `from` sends reaches `to` (on the links
   * either one opened), while `to` still reaches `from`. Silent, until heal().
   */
  blockOneWay(from: string, to: string): void {
    for (const p of this.linksBetween(from, to)) p.blackHole('to-target');
    for (const p of this.linksBetween(to, from)) p.blackHole('to-client');
  }

  /** Delays every byte between the two groups by `ms`, both ways (0 ends it). */
  delayBetween(a: string[], b: string[], ms: number): void {
    for (const [from, to] of this.crossing(a, b)) for (const p of this.linksBetween(from, to)) p.delay(ms);
  }

  /** Ends every partition and black hole (delays stay). */
  heal(): void {
    for (const pair of this.proxies.values()) for (const p of pair) p.heal();
  }

  /** The proxied (from, to) node pairs that cross between the groups, both directions. */
  private crossing(a: string[], b: string[]): Array<[string, string]> {
    return [...this.proxies.keys()]
      .map((key) => key.split('>') as [string, string])
      .filter(([from, to]) => (a.includes(from) && b.includes(to)) || (b.includes(from) && a.includes(to)));
  }

  /** What node `name` answers to `P` right now: 'active' (P), 'standby' (M ...), or 'down'. */
  async roleOf(name: string): Promise<{ role: 'active' | 'standby' | 'down'; redirect?: string }> {
    const n = this.node(name);
    try {
      const w = await Wire.open(n.port);
      const token = this.options.clientToken;
      const reply = await w.ask(token === undefined ? 'P' : `H 1 ${token}\nP`, 2_000);
      w.destroy();
      if (reply === 'P' || reply.startsWith('H 1 ')) return { role: 'active' };
      if (reply.startsWith('M ')) return { role: 'standby', redirect: reply.slice(2) };
      return { role: 'down' };
    } catch {
      return { role: 'down' };
    }
  }

  /**
   * Waits until exactly the nodes in `expected` answer as active and every
   * other running node redirects to an active one (not `M -`); returns how
   * long that took.
   */
  async waitForActives(expected: string[], timeoutMs = 10_000): Promise<number> {
    const t0 = performance.now();
    for (;;) {
      const roles = await Promise.all(this.nodes.map(async (n) => [n.name, await this.roleOf(n.name)] as const));
      const actives = roles.filter(([, r]) => r.role === 'active').map(([name]) => name);
      const settled = roles.every(([, r]) => r.role !== 'standby' || r.redirect !== '-');
      if (settled && actives.length === expected.length && expected.every((e) => actives.includes(e))) return performance.now() - t0;
      if (performance.now() - t0 > timeoutMs) throw new Error(`expected active ${expected.join(',')}, got ${JSON.stringify(roles)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** What node `name` says at /status (it must run with `--http`). */
  async status(name: string): Promise<NodeStatusJson> {
    const http = this.node(name).server?.http;
    if (http === undefined) throw new Error(`${name} is not running with --http`);
    const headers: Record<string, string> = this.options.httpToken === undefined ? {} : { authorization: `Bearer ${this.options.httpToken}` };
    return (await (await fetch(`http://${http}/status`, { headers })).json()) as NodeStatusJson;
  }

  /** Locks held on each running node, by name. */
  async heldPerNode(): Promise<Record<string, number>> {
    const running = this.nodes.filter((n) => n.server !== undefined);
    const held = await Promise.all(running.map(async (n) => (await this.status(n.name)).locks.held));
    return Object.fromEntries(running.map((n, i) => [n.name, held[i]!]));
  }

  /** Waits (at most `timeoutMs`) until every running node's held count passes `ok`. */
  async waitForHeld(ok: (held: number) => boolean, timeoutMs = 8_000): Promise<void> {
    const until = performance.now() + timeoutMs;
    for (;;) {
      const held = await this.heldPerNode();
      if (Object.values(held).every(ok)) return;
      if (performance.now() > until) throw new Error(`held locks per node: ${JSON.stringify(held)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** How fast each running node's clock goes against real time: its uptime's growth over one second. */
  async clockRates(): Promise<Record<string, number>> {
    const running = this.nodes.filter((n) => n.server !== undefined);
    const uptimes = async () => Promise.all(running.map(async (n) => (await this.status(n.name)).uptimeMs));
    const before = await uptimes();
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, 1_000));
    const after = await uptimes();
    const elapsed = performance.now() - t0;
    return Object.fromEntries(running.map((n, i) => [n.name, (after[i]! - before[i]!) / elapsed]));
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map(async (n) => this.kill(n.name, 'SIGKILL')));
    await Promise.all([...this.proxies.values()].flat().map(async (p) => p.close()));
  }
}
