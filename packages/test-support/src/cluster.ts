/**
 * Real multi-node clusters on loopback for tests. Optionally every link
 * between two nodes goes through a TcpProxy pair the test controls (one pair
 * per direction), so links can be cut to partition the cluster.
 */
import { adminStatus, startServer, tempDir, type NodeStatusJson, type RunningServer } from './server.js';
import { TcpProxy, type CutMode } from './proxy.js';
import { clockOffsetEnv, clockRateEnv } from './clock.js';
import { freePortPairs } from './ports.js';
import { Wire } from './wire.js';

/** The peer token test clusters use when a test gives none. */
export const TEST_PEER_TOKEN = '7465737420636c7573746572207065657220746f6b656e2c2032353620626974';

export interface NodeHandle {
  readonly name: string;
  readonly port: number;
  server: RunningServer | undefined;
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
  /** Nodes whose wall clocks are this many seconds off real time (libfaketime), by name. */
  readonly clockOffsets?: Readonly<Record<string, number>>;
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

  /**
   * Starts node `name`; `peers` replaces the peers list it would get (a misconfigured node);
   * `bin`: another `ticketing` command to run it with (a node of an earlier release).
   */
  async start(name: string, extra: string[] = [], peers?: string, { bin }: { bin?: string } = {}): Promise<RunningServer> {
    const n = this.node(name);
    // A cluster refuses to start without peer authentication: tests use a peer token unless they bring their own.
    const given = [...(this.options.extraArgs ?? []), ...extra];
    const secured = given.some((a) => a === '--peer-token' || a === '--peer-token-file' || a === '--tls-cert' || a === '--insecure-peers');
    const storage = this.options.dataDirs === true ? ['--data-dir', this.dirs.get(name)!] : ['--memory'];
    const rate = this.options.clockRates?.[name];
    const offset = this.options.clockOffsets?.[name];
    const env = rate !== undefined ? clockRateEnv(rate) : offset !== undefined ? clockOffsetEnv(offset) : undefined;
    n.server = await startServer(
      ['--listen', `127.0.0.1:${n.port}`, '--node', name, '--peers', peers ?? this.peersFor(n), ...storage, ...(secured ? [] : ['--peer-token', TEST_PEER_TOKEN]), ...given],
      { memory: false, ...(env === undefined ? {} : { env }), ...(bin === undefined ? {} : { bin }) },
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
    const server = this.node(name).server;
    if (server === undefined) throw new Error(`${name} is not running`);
    return adminStatus(server, this.options.httpToken);
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

  /**
   * How fast each running node's clock goes against real time: its uptime's growth over two
   * seconds, each reading placed at the middle of its request (so a slow reply on a loaded
   * machine shifts the estimate by a few percent at most, not by its whole delay).
   */
  async clockRates(): Promise<Record<string, number>> {
    const running = this.nodes.filter((n) => n.server !== undefined);
    const read = async (n: NodeHandle) => {
      const sent = performance.now();
      const uptime = (await this.status(n.name)).uptimeMs;
      return { uptime, at: (sent + performance.now()) / 2 };
    };
    const before = await Promise.all(running.map(read));
    await new Promise((r) => setTimeout(r, 2_000));
    const after = await Promise.all(running.map(read));
    return Object.fromEntries(running.map((n, i) => [n.name, (after[i]!.uptime - before[i]!.uptime) / (after[i]!.at - before[i]!.at)]));
  }

  /**
   * Skewed clocks and leases: grants `count` locks of `leaseS` seconds on `port` (the active node or
   * leader, real time), then checks that every running node still has them all at a moment when a
   * node whose clock runs `fastRate` times real time would, by its own clock, have ended them, and
   * that every node has removed them once the leader's lease is over, well before a node at
   * `slowRate` would have by its own. Each moment is in the middle of its window (seconds of
   * margin either side, so a loaded machine cannot make it pass or fail by accident); a check
   * that ran too late to prove anything fails. Returns the tokens granted.
   */
  async expectLeasesFollowTheLeader(port: number, { count = 20, leaseS = 8, fastRate = 2, slowRate = 0.5 } = {}): Promise<bigint[]> {
    const sent = performance.now();
    const wire = await Wire.open(port, '127.0.0.1');
    const token = this.options.clientToken;
    if (token !== undefined) await wire.ask(`H 1 ${token}`);
    wire.send(Array.from({ length: count }, (_, i) => `A skew${i} 0 ${leaseS}\n`).join(''));
    const replies = await wire.lineCount(count, 10_000);
    wire.destroy();
    const tokens = replies.map((r) => {
      const m = /^A (\d+) skew\d+$/.exec(r);
      if (m === null) throw new Error(`not a grant: ${r}`);
      return BigInt(m[1]!);
    });
    const acked = performance.now();
    await this.waitForHeld((held) => held === count, 5_000);
    const fastEnds = leaseS * 1000 / fastRate;
    const leaderEnds = leaseS * 1000;
    await new Promise((r) => setTimeout(r, acked + (fastEnds + leaderEnds) / 2 - performance.now()));
    const held = await this.heldPerNode();
    if (performance.now() > sent + leaderEnds) throw new Error(`the held-locks check ran ${Math.round(performance.now() - sent)} ms after the grants, past their ${leaseS} s lease: it proves nothing`);
    for (const [name, n] of Object.entries(held)) if (n !== count) throw new Error(`${name} holds ${n} of the ${count} locks before the leader's lease ended: ${JSON.stringify(held)}`);
    await this.waitForHeld((n) => n === 0, sent + (leaderEnds + leaseS * 1000 / slowRate) / 2 - performance.now());
    return tokens;
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map(async (n) => this.kill(n.name, 'SIGKILL')));
    await Promise.all([...this.proxies.values()].flat().map(async (p) => p.close()));
  }
}
