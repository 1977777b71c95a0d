/**
 * Client-visible failover of a priority cluster (issues 13 and 26): the
 * official TypeScript client acquires and releases in a loop against a
 * two-node cluster while the active is killed (kill -9), hangs (SIGSTOP: a
 * silent active, not a dead one) or is stopped (SIGTERM: the hand-off); the
 * outage is from the last acquire the old active granted to the first the
 * new one granted. And the hand-back: the same loop on the standby that took
 * over, while the higher-priority node starts again; from its ready line to
 * the first acquire it grants.
 */
import { TicketBroker } from '@ticketing/client';
import { sleep } from './procs.js';
import { startTwoNodes, type TwoNodes } from './cluster-bench.js';

/** Which node granted: the token's residue modulo 16 is the node's index (a 0, b 1). */
type Granter = 'a' | 'b';

/**
 * The official client's acquire/release loop over both nodes; `granted` is
 * told who granted each acquire and when. Returns a function that stops it.
 */
function clientLoop(c: TwoNodes, granted: (by: Granter, at: number) => boolean): { broker: TicketBroker; done: Promise<void>; stop: () => void } {
  const broker = TicketBroker.connect([`127.0.0.1:${c.aPort}`, `127.0.0.1:${c.bPort}`]);
  broker.on('error', () => {}); // failed releases during the outage are expected
  let running = true;
  const done = (async () => {
    await broker.waitReady(5_000);
    for (let i = 0; running; i++) {
      try {
        const t = await broker.acquire(`fo${i % 64}`, { waitMs: 0, leaseMs: 5_000 });
        if (!granted(t.token % 16n === 0n ? 'a' : 'b', performance.now())) running = false;
        void t.release().catch(() => {});
      } catch {
        await sleep(1); // no connection or indeterminate during the failover: try again
      }
    }
  })();
  return { broker, done, stop: () => (running = false) };
}

/**
 * Starts a pair, runs the client loop, sends `signal` to the active after a
 * warm-up, and resolves with the client's outage in ms.
 */
export async function clientFailoverOnce(signal: 'SIGKILL' | 'SIGTERM' | 'SIGSTOP'): Promise<number> {
  const c = await startTwoNodes();
  let lastOnA = NaN;
  let outage = NaN;
  const loop = clientLoop(c, (by, at) => {
    if (by === 'a') lastOnA = at;
    else outage = at - lastOnA;
    return by === 'a';
  });
  try {
    await sleep(500);
    c.a.proc.kill(signal);
    const deadline = performance.now() + 10_000;
    while (Number.isNaN(outage) && performance.now() < deadline) await sleep(10);
    loop.stop();
    await loop.done;
    return outage;
  } finally {
    if (signal === 'SIGSTOP') c.a.proc.kill('SIGCONT');
    await loop.broker.close();
    await c.stop();
  }
}

/**
 * b serves (a was killed) under the client loop; a starts again: ms from its
 * ready line to the first acquire it grants (b hands back once a keeps up).
 */
export async function handBackOnce(): Promise<number> {
  const c = await startTwoNodes();
  let readyAt = NaN;
  let backAt = NaN;
  const loop = clientLoop(c, (by, at) => {
    if (by === 'a' && !Number.isNaN(readyAt)) backAt = at;
    return Number.isNaN(backAt);
  });
  try {
    await sleep(300);
    c.a.proc.kill('SIGKILL');
    await sleep(1_500); // b took over; the loop runs on it
    await c.restartA();
    readyAt = performance.now();
    const deadline = readyAt + 15_000;
    while (Number.isNaN(backAt) && performance.now() < deadline) await sleep(10);
    loop.stop();
    await loop.done;
    return backAt - readyAt;
  } finally {
    await loop.broker.close();
    await c.stop();
  }
}
