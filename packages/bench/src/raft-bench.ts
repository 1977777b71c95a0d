/**
 * Raft-mode measurements: a 3-node cluster with fsync on, kill -9 of its
 * leader, and SIGTERM of its leader (a leadership transfer) as the
 * TypeScript client's acquire loop sees it.
 */
import { TicketBroker } from '@ticketing/client';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ask, peerLinkArgs, type PeerLinks } from './cluster-bench.js';
import { freePortPair, sleep, startTicketing, type Proc } from './procs.js';

export interface RaftCluster {
  readonly nodes: Proc[];
  readonly ports: number[];
  leaderPort(): Promise<number>;
  stop(): Promise<void>;
}

export async function startRaftCluster(size = 3, extra: string[] = [], links: PeerLinks = 'tls'): Promise<RaftCluster> {
  const ports: number[] = [];
  for (let i = 0; i < size; i++) ports.push(await freePortPair());
  const peers = ports.map((p, i) => `n${i}=127.0.0.1:${p}`).join(',');
  const dirs = ports.map(() => mkdtempSync(join(tmpdir(), 'bench-raft-')));
  const nodes = await Promise.all(
    ports.map(async (p, i) =>
      startTicketing(['--mode', 'raft', '--listen', `127.0.0.1:${p}`, '--node', `n${i}`, '--peers', peers, ...peerLinkArgs(links), '--data-dir', dirs[i]!, '--max-pending-per-conn', '4096', ...extra]),
    ),
  );
  const cluster: RaftCluster = {
    nodes,
    ports,
    async leaderPort() {
      for (;;) {
        for (const p of ports) if ((await ask(p, 'P\n')) === 'P') return p;
        await sleep(20);
      }
    },
    async stop() {
      await Promise.all(nodes.map(async (n) => n.stop()));
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    },
  };
  await cluster.leaderPort();
  return cluster;
}

/** kill -9 the leader; time until another node grants. */
export async function raftFailoverOnce(): Promise<number> {
  const c = await startRaftCluster();
  try {
    const leader = await c.leaderPort();
    await sleep(300);
    const i = c.ports.indexOf(leader);
    const t0 = performance.now();
    c.nodes[i]!.proc.kill('SIGKILL');
    const others = c.ports.filter((p) => p !== leader);
    for (let n = 0; ; n++) {
      for (const p of others) if ((await ask(p, `A failover${n} 0 30\n`)).startsWith('A ')) return performance.now() - t0;
      await sleep(5);
    }
  } finally {
    await c.stop();
  }
}

/**
 * SIGTERM of the leader under the official TypeScript client's acquire loop
 * (over all three nodes): it hands leadership to the most caught-up voter,
 * holds its clients' requests until the successor leads, and redirects them.
 * Ms from the signal to the first acquire sent after it that is granted.
 */
export async function raftClientHandOverOnce(): Promise<number> {
  const c = await startRaftCluster();
  const broker = TicketBroker.connect(c.ports.map((p) => `127.0.0.1:${p}`));
  broker.on('error', () => {}); // releases that meet the hand-over may fail
  let signalledAt = Infinity;
  let outage = NaN;
  let running = true;
  const loop = (async () => {
    await broker.waitReady(5_000);
    for (let i = 0; running; i++) {
      const sentAt = performance.now();
      try {
        const t = await broker.acquire(`ho${i % 64}`, { waitMs: 0, leaseMs: 5_000 });
        if (sentAt > signalledAt) {
          outage = performance.now() - signalledAt;
          running = false;
        }
        void t.release().catch(() => {});
      } catch {
        await sleep(1); // redirected or indeterminate during the hand-over: try again
      }
    }
  })();
  try {
    const leader = await c.leaderPort();
    await sleep(500);
    signalledAt = performance.now();
    c.nodes[c.ports.indexOf(leader)]!.proc.kill('SIGTERM');
    const deadline = signalledAt + 10_000;
    while (Number.isNaN(outage) && performance.now() < deadline) await sleep(5);
    return outage;
  } finally {
    running = false;
    await loop;
    await broker.close();
    await c.stop();
  }
}
