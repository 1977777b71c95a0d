/**
 * One simulated machine running one real TicketingNode: its disk outlives
 * the process, a power loss keeps only what the disk made durable, and the
 * node is started, killed and restarted as an operator (or a crash) would.
 */
import { loadConfig, TicketingNode, type ServerConfig } from '@ticketing/server';
import { pino, type Logger } from 'pino';
import type { Scheduler } from './scheduler.js';
import { SimClock } from './sim-clock.js';
import { SimFs } from './sim-fs.js';
import type { SimNetwork } from './sim-network.js';
import { SimProcess } from './sim-process.js';

export const CLIENT_PORT = 5225;
export const DATA_DIR = '/var/lib/ticketing';
/** Every simulated node's peer token (256 bits, as production needs at least 128). */
export const SIM_PEER_TOKEN = '73696d756c61746564207065657220746f6b656e20666f72207465737473ff01';

/**
 * The client identities a simulation's nodes accept (client-tokens): a bare
 * token and two named identities, so that grants carry owners and only their
 * identity may release or extend them (a failover keeps the owner). Named
 * grants are where issue 27's D-2 hid: a connection closed before its grant
 * committed, and the cleanup release, made without the identity, was refused.
 */
export const SIM_CLIENT_TOKENS = {
  bare: 'sim-bare-client-token-8b1f0c2e9a47d3',
  alice: 'sim-alice-client-token-5e2d7a9c14b06f',
  bob: 'sim-bob-client-token-c3a8e61f27d94b0',
} as const;
export const SIM_CLIENT_IDENTITIES = [
  SIM_CLIENT_TOKENS.bare,
  { name: 'alice', token: SIM_CLIENT_TOKENS.alice, keys: [''] },
  { name: 'bob', token: SIM_CLIENT_TOKENS.bob, keys: ['k', 'p'] },
] as const;

export type MachineState = 'down' | 'starting' | 'up' | 'refused';

export interface MachineOptions {
  /** The machine's host name (its network address). */
  readonly name: string;
  /** The node's name when it differs from the host's (a node moved to another machine). */
  readonly node?: string;
  /** --peers: node names, each on the host of its name, or NAME=HOST. */
  readonly peers: readonly string[];
  readonly mode: 'raft' | 'priority';
  /** Extra config keys (flags) for every start. */
  readonly flags?: Record<string, unknown>;
}

export class SimMachine {
  fs = new SimFs();
  readonly clock: SimClock;
  proc: SimProcess | undefined;
  node: TicketingNode | undefined;
  state: MachineState = 'down';
  /** Why the last start failed or the node stopped itself. */
  lastError: string | undefined;
  /** The last start refused because the node's storage is damaged (not a passing I/O error). */
  corrupt = false;
  /** Starts so far (the first one creates the data directory). */
  starts = 0;
  /** The next start replaces a lost member (--raft-join): its data directory was wiped. */
  joinNext = false;
  /** Disk operations take this many times their usual latency (a stalling disk: a fault). */
  diskSlowdown = 1;
  /** Config keys the next starts use instead of the usual ones (an operator's mistake, a mode switch). */
  overrides: Record<string, unknown> = {};
  /**
   * The peer protocol versions the next starts speak: undefined for this
   * release's, [2] for a node that stands in for the previous release
   * (0.1.0, which speaks version 2 only) during a rolling upgrade.
   */
  peerProtocols: readonly number[] | undefined;
  /**
   * Every index this machine's node has had in its own peers list (priority tokens carry it as their
   * residue modulo 16); more than one when the operator started it with a mistaken list.
   */
  readonly indexes = new Set<number>();
  /** A spare the operator has not added to the cluster (or has removed): no fault, repair or restart touches it. */
  retired = false;
  /** The disk's fired faults when the running process started (see exited). */
  private faultsAtStart = 0;
  /** A graceful restart under way: once the process has exited, start it again this much later. */
  private restartDelayMs: number | undefined;
  /** The last error the node logged (what a self-crash is explained with). */
  private lastLogged: string | undefined;
  private readonly alive = new Set<number>();

  constructor(
    private readonly sched: Scheduler,
    private readonly net: SimNetwork,
    /** What the operator starts the node with (a membership change may have them edit it). */
    public options: MachineOptions,
    clockOptions: { rate: number; wallOffsetMs: number },
  ) {
    this.clock = new SimClock(sched, options.name, clockOptions);
    // Its node's work takes time on its own CPU (scheduler.ts, CPU_COST).
    sched.cpu(options.name);
  }

  get name(): string {
    return this.options.name;
  }

  get address(): string {
    return `${this.name}:${CLIENT_PORT}`;
  }

  /** The node's name (the host's unless it was moved here). */
  get nodeName(): string {
    return this.options.node ?? this.name;
  }

  config(): ServerConfig {
    const o = this.options;
    return loadConfig({
      listen: this.address,
      node: this.nodeName,
      peers: o.peers.map((p) => (p.includes('=') ? `${p}:${CLIENT_PORT}` : `${p}=${p}:${CLIENT_PORT}`)).join(','),
      mode: o.mode,
      'data-dir': DATA_DIR,
      'log-level': 'warn',
      // Plain peer links are allowed on loopback only; the simulated transport carries no real TLS
      // (it runs the same handshake lines inside, see seams/tls-model.ts).
      'peer-token': SIM_PEER_TOKEN,
      ...(this.joinNext ? { 'raft-join': true } : {}),
      ...o.flags,
      ...this.overrides,
    });
  }

  /** Starts a new process running the node. */
  start(): void {
    if (this.state === 'starting' || this.state === 'up') return;
    this.restartDelayMs = undefined;
    this.starts++;
    this.clock.resume();
    const proc = new SimProcess(this.name, this.sched, this.clock, this.net, () => this.fs, () => this.alive, () => this.diskSlowdown);
    this.proc = proc;
    this.alive.add(proc.pid);
    this.state = 'starting';
    const config = this.config();
    const index = config.peers.findIndex((p) => p.startsWith(`${this.nodeName}=`));
    if (index >= 0) this.indexes.add(index);
    this.faultsAtStart = this.fs.faultsFired;
    this.sched.note(`${this.name}: starting (pid ${proc.pid}${this.peerProtocols === undefined ? '' : `, the previous release: peer protocol ${this.peerProtocols.join(',')}`})`);
    const onInternalError = (err: Error, where: string) => {
      if (this.proc === proc && proc.alive) this.sched.failedItself(`${this.name}: internal error ${where}: ${err.stack ?? err.message}`);
    };
    const release = this.peerProtocols === undefined ? {} : { peerProtocols: this.peerProtocols };
    TicketingNode.start(config, { ...proc.env, ...release, logger: this.logger(), onExit: (code) => this.exited(proc, code), onInternalError }).then(
      (node) => {
        if (this.proc !== proc || !proc.alive) return;
        this.node = node;
        this.state = 'up';
        // The operator starts a replaced node with --raft-join until it has come up once.
        this.joinNext = false;
        const raft = node.raftLog()?.status;
        this.sched.note(`${this.name}: up${raft === undefined ? '' : ` (term ${raft.term}, log ${raft.snapshot}..${raft.lastIndex}, commit ${raft.commit})`}`);
      },
      (err: unknown) => {
        if (this.proc !== proc || !proc.alive) return;
        this.lastError = (err as Error).message;
        this.corrupt = (err as { code?: string }).code === 'STORAGE_CORRUPT';
        this.sched.note(`${this.name}: refused to start: ${this.lastError}`);
        this.stopProcess();
        this.state = 'refused';
      },
    );
  }

  /**
   * SIGTERM, then a start once the process has exited, `delayMs` later: what
   * `systemctl restart` does. A SIGTERM'd active hands off first, which can
   * take seconds; a start timed from the signal instead would find the old
   * process still running and never happen (fresh seed 3244010225).
   */
  gracefulRestart(delayMs: number): void {
    if (this.state !== 'up' || this.node === undefined) return;
    this.restartDelayMs = delayMs;
    void this.node.shutdown();
  }

  /** kill -9: the process is gone; the disk keeps what the kernel has (page cache included). */
  kill(): void {
    if (this.proc === undefined) return;
    this.sched.note(`${this.name}: killed`);
    this.stopProcess();
    this.state = 'down';
  }

  /** Power loss: the process dies and the disk keeps only what was durable (and torn pieces). */
  powerLoss(): void {
    this.sched.note(`${this.name}: power loss`);
    // What the disk keeps is decided with the process still in the middle of its writes.
    const after = this.fs.crash(this.sched.random);
    this.stopProcess();
    this.fs = after;
    this.state = 'down';
  }

  /** When its data directory was wiped (simulated ms), in order. */
  readonly wipedAt: number[] = [];

  /** The operator replaces a broken disk: an empty data directory, and the node rejoins. */
  wipe(): void {
    this.sched.note(`${this.name}: data directory wiped`);
    this.wipedAt.push(this.sched.now);
    this.stopProcess();
    this.fs = new SimFs();
    this.state = 'down';
    this.corrupt = false;
    this.joinNext = (this.overrides.mode ?? this.options.mode) === 'raft';
  }

  private stopProcess(): void {
    const proc = this.proc;
    if (proc === undefined) return;
    proc.kill();
    this.alive.delete(proc.pid);
    this.proc = undefined;
    this.node = undefined;
  }

  /** The node stopped itself (a fatal storage error, a shutdown). */
  private exited(proc: SimProcess, code: number): void {
    if (this.proc !== proc) return;
    this.sched.note(`${this.name}: exited with code ${code}`);
    this.lastError ??= `exited with code ${code}`;
    this.stopProcess();
    this.state = 'down';
    if (code === 0) {
      // A graceful shutdown: started again if it was a restart.
      const delay = this.restartDelayMs;
      if (delay !== undefined) {
        this.sched.after(delay, `operator: start ${this.name} again`, () => {
          if (this.state === 'down' && !this.retired) this.start();
        });
      }
      return;
    }
    // A node stops itself only for a disk that failed under it: without one, it crashed itself.
    if (this.fs.faultsFired === this.faultsAtStart) {
      this.sched.failedItself(`${this.name} stopped itself (exit ${code}) with no disk fault to explain it: ${this.lastLogged ?? 'nothing logged'}`);
    }
    // As systemd's Restart=on-failure would: a node that stopped itself comes back a little later.
    this.sched.after(100 + this.sched.random() * 900, `supervisor: restart ${this.name}`, () => {
      if (this.state === 'down' && !this.retired) this.start();
    });
  }

  private logger(): Logger {
    const name = this.name;
    const sched = this.sched;
    const remember = (text: string) => (this.lastLogged = text);
    return pino(
      { level: 'warn', base: undefined, timestamp: false },
      {
        write(line: string): void {
          const entry = JSON.parse(line) as { level?: number; msg?: string; err?: { message?: string } | string };
          const err = typeof entry.err === 'string' ? entry.err : entry.err?.message;
          const text = `${entry.msg ?? ''}${err === undefined ? '' : ` (${err})`}`;
          if ((entry.level ?? 0) >= 50) remember(text);
          sched.note(`${name}: log: ${text}`);
        },
      },
    );
  }
}
