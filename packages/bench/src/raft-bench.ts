/** Raft-mode measurements: a 3-node cluster with fsync on, and kill -9 of its leader. */
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
