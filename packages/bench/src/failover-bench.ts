/**
 * Client-visible failover of a priority cluster (issue 13): the official
 * TypeScript client acquires and releases in a loop against a two-node
 * cluster while the active is killed (kill -9) or stopped (SIGTERM); the
 * outage is from the last acquire the old active granted to the first the
 * new one granted.
 */
import { TicketBroker } from '@ticketing/client';
import { sleep } from './procs.js';
import { startTwoNodes } from './cluster-bench.js';

/**
 * Starts a pair, runs the client loop, sends `signal` to the active after a
 * warm-up, and resolves with the client's outage in ms.
 */
export async function clientFailoverOnce(signal: 'SIGKILL' | 'SIGTERM'): Promise<number> {
  const c = await startTwoNodes();
  const broker = TicketBroker.connect([`127.0.0.1:${c.aPort}`, `127.0.0.1:${c.bPort}`]);
  broker.on('error', () => {}); // failed releases during the outage are expected
  try {
    await broker.waitReady(5_000);
    let running = true;
    // Which node granted is in the token: its residue modulo 16 is the node's index (a 0, b 1).
    let lastOnA = NaN;
    let outage = NaN;
    const loop = (async () => {
      for (let i = 0; running; i++) {
        try {
          const t = await broker.acquire(`fo${i % 64}`, { waitMs: 0, leaseMs: 5_000 });
          if (t.token % 16n === 0n) lastOnA = performance.now();
          else {
            outage = performance.now() - lastOnA;
            running = false;
          }
          void t.release().catch(() => {});
        } catch {
          await sleep(1); // no connection or indeterminate during the failover: try again
        }
      }
    })();
    await sleep(500);
    c.a.proc.kill(signal);
    const deadline = performance.now() + 10_000;
    while (running && performance.now() < deadline) await sleep(10);
    running = false;
    await loop;
    return outage;
  } finally {
    await broker.close();
    await c.stop();
  }
}
