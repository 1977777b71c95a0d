/**
 * Priority-cluster measurements: throughput with a standby replicating,
 * failover time after kill -9, and the gap a graceful hand-off leaves.
 */
import { Wire } from '@ticketing/test-support';
import { freePortPair, sleep, startTicketing, type Proc } from './procs.js';

/** The benchmark clusters' peer token (peer tokens need at least 128 bits). */
export const BENCH_PEER_TOKEN = '62656e63682070656572746f6b656e2032353620626974732c2068657821212e';

/**
 * How a benchmark cluster's peer links run: 'tls' (TLS 1.3 keyed by the peer
 * token, what every deployment runs) or 'plain' (--insecure-peers on
 * loopback: the cost of TLS is the difference).
 */
export type PeerLinks = 'tls' | 'plain';

export function peerLinkArgs(links: PeerLinks): string[] {
  return links === 'tls' ? ['--peer-token', BENCH_PEER_TOKEN] : ['--insecure-peers'];
}

export interface TwoNodes {
  a: Proc;
  readonly b: Proc;
  readonly aPort: number;
  readonly bPort: number;
  /** Starts a again (after it was killed) with the same flags; resolves at its ready line. */
  restartA(): Promise<Proc>;
  stop(): Promise<void>;
}

/** Starts nodes a (higher priority) and b; resolves once a serves. */
export async function startTwoNodes(extra: string[] = [], links: PeerLinks = 'tls'): Promise<TwoNodes> {
  const aPort = await freePortPair();
  const bPort = await freePortPair();
  const peers = `a=127.0.0.1:${aPort},b=127.0.0.1:${bPort}`;
  const common = ['--memory', '--peers', peers, ...peerLinkArgs(links), '--max-pending-per-conn', '4096', '--http', '127.0.0.1:0', ...extra];
  const startA = async () => startTicketing(['--listen', `127.0.0.1:${aPort}`, '--node', 'a', ...common]);
  const a = await startA();
  const b = await startTicketing(['--listen', `127.0.0.1:${bPort}`, '--node', 'b', ...common]);
  while ((await ask(aPort, 'P\n')) !== 'P') await sleep(20);
  while (!(await ask(bPort, 'P\n')).startsWith('M 127')) await sleep(20);
  const nodes: TwoNodes = {
    a,
    b,
    aPort,
    bPort,
    restartA: async () => (nodes.a = await startA()),
    stop: async () => void (await Promise.all([nodes.a.stop(), b.stop()])),
  };
  return nodes;
}

/** Sends `line` on a new connection and resolves with the first reply line ('' if none within 2 s or refused). */
export async function ask(port: number, line: string): Promise<string> {
  let w: Wire | undefined;
  try {
    w = await Wire.open(port);
    return await w.ask(line, 2_000);
  } catch {
    return '';
  } finally {
    w?.destroy();
  }
}

/** kill -9 the active, then time until the standby grants. */
export async function failoverOnce(): Promise<number> {
  const c = await startTwoNodes();
  try {
    await sleep(300);
    const t0 = performance.now();
    c.a.proc.kill('SIGKILL');
    for (let i = 0; ; i++) {
      if ((await ask(c.bPort, `A failover${i} 0 30\n`)).startsWith('A ')) return performance.now() - t0;
      await sleep(2);
    }
  } finally {
    await c.stop();
  }
}

/**
 * SIGTERM the active while a client acquires in a loop; the gap is from its
 * last grant on the old active to its first on the new one (the client moves
 * on the M it receives).
 */
export async function handOffGapOnce(): Promise<number> {
  const c = await startTwoNodes();
  try {
    await sleep(300);
    let lastOnA = 0;
    for (let i = 0; i < 20; i++) {
      if ((await ask(c.aPort, `A warm${i} 0 30\n`)).startsWith('A ')) lastOnA = performance.now();
    }
    const stopping = c.a.stop();
    for (let i = 0; ; i++) {
      const reply = await ask(c.aPort, `A before${i} 0 30\n`);
      if (reply.startsWith('A ')) lastOnA = performance.now();
      else break;
    }
    for (let i = 0; ; i++) {
      if ((await ask(c.bPort, `A after${i} 0 30\n`)).startsWith('A ')) {
        const gap = performance.now() - lastOnA;
        await stopping;
        return gap;
      }
      await sleep(1);
    }
  } finally {
    await c.stop();
  }
}

/** Samples the active node's replication lag (from its /status) every 100 ms until `done` resolves. */
export async function sampleLag(active: Proc, done: Promise<unknown>): Promise<{ ms: number[]; commands: number[] }> {
  const ms: number[] = [];
  const commands: number[] = [];
  let running = true;
  void done.then(() => (running = false));
  while (running) {
    try {
      const res = await fetch(`http://${active.http}/status`);
      const status = (await res.json()) as { peers: Array<{ lag?: number; lagMs?: number }> };
      for (const p of status.peers) {
        if (p.lagMs !== undefined) ms.push(p.lagMs);
        if (p.lag !== undefined) commands.push(p.lag);
      }
    } catch {
      // a sample lost under load: skip it
    }
    await sleep(100);
  }
  return { ms, commands };
}

export function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}
