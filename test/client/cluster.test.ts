/**
 * The client against a real two-node priority cluster: it follows `M` from a
 * standby to the active node, and an acquire waiting on a node that steps
 * down (its early `T`) is re-sent to the new active node with the wait left.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { TicketBroker } from '../../packages/client/src/index.js';
import { TestCluster } from '@ticketing/test-support';
import { uniqueKey as k } from './helpers/client.js';

let cluster: TestCluster | undefined;
let broker: TicketBroker | undefined;
afterEach(async () => {
  await broker?.close();
  await cluster?.stop();
  broker = cluster = undefined;
});

async function twoNodes(): Promise<TestCluster> {
  cluster = await TestCluster.create(['a', 'b']);
  await cluster.startAll();
  await cluster.waitForActives(['a']);
  return cluster;
}

/**
 * Acquires a fresh key until it is granted, while a failover is under way:
 * until then only NO_CONNECTION or INDETERMINATE may come, and not past
 * `limitMs` after `t0`; tries again every `pollMs`.
 */
async function acquireThroughFailover(broker: TicketBroker, t0: number, limitMs: number, pollMs: number) {
  for (;;) {
    try {
      return await broker.acquire(k(), { waitMs: 0, leaseMs: 10_000 });
    } catch (err) {
      expect((err as { code?: string }).code).toMatch(/^(NO_CONNECTION|INDETERMINATE)$/);
      expect(performance.now() - t0).toBeLessThan(limitMs);
      await new Promise((r) => setTimeout(r, pollMs));
    }
  }
}

describe('priority cluster', () => {
  it('follows M from the standby to the active node', async () => {
    const c = await twoNodes();
    broker = TicketBroker.connect(`127.0.0.1:${c.node('b').port}`);
    await broker.waitReady(5_000);
    const ticket = await broker.acquire(k(), { waitMs: 0, leaseMs: 10_000 });
    expect(await ticket.release()).toBe('released');
  });

  it('keeps working through a kill -9 failover: new acquires succeed on the new active, and a release reaches it', async () => {
    const c = await twoNodes();
    broker = TicketBroker.connect([`127.0.0.1:${c.node('a').port}`, `127.0.0.1:${c.node('b').port}`]);
    await broker.waitReady(5_000);
    const key = k();
    const held = await broker.acquire(key, { waitMs: 0, leaseMs: 60_000 });
    await c.waitForHeld((held) => held === 1); // replicated to b
    await c.kill('a');
    await c.waitForActives(['b']);
    // The broker's connections are re-made at once after the drop; until b serves, acquires may find no connection.
    const ticket = await acquireThroughFailover(broker, performance.now(), 8_000, 100);
    expect(ticket.token).toBeGreaterThan(held.token);
    await ticket.release();
    // The lock held before the failover was replicated: its release, retried, reaches b.
    expect(await held.release()).toBe('released');
  });

  it('defect 7: sees a kill -9 failover for well under a second (immediate retry, the deciding standby holds requests)', async () => {
    const c = await twoNodes();
    broker = TicketBroker.connect([`127.0.0.1:${c.node('a').port}`, `127.0.0.1:${c.node('b').port}`]);
    await broker.waitReady(5_000);
    const before = await broker.acquire(k(), { waitMs: 0, leaseMs: 10_000 });
    await new Promise((r) => setTimeout(r, 200));
    const t0 = performance.now();
    await c.kill('a');
    const ticket = await acquireThroughFailover(broker, t0, 5_000, 10);
    const outage = performance.now() - t0;
    // Target: a median at most 1 s (npm run bench measures it); one run on a shared machine gets some slack.
    expect(outage).toBeLessThan(1_500);
    expect(ticket.token).toBeGreaterThan(before.token);
  });

  it('re-sends a waiting acquire to the new active node when the old one steps down', async () => {
    const c = await twoNodes();
    broker = TicketBroker.connect([`127.0.0.1:${c.node('a').port}`, `127.0.0.1:${c.node('b').port}`]);
    await broker.waitReady(5_000);
    const key = k();
    const holder = await broker.acquire(key, { waitMs: 0, leaseMs: 30_000 });
    const waiting = broker.acquire(key, { waitMs: 20_000, leaseMs: 30_000 });
    await new Promise((r) => setTimeout(r, 200));
    // Graceful stop: a hands off to b and answers its waiter T long before its wait ran out.
    await c.kill('a', 'SIGTERM');
    await c.waitForActives(['b']);
    // The holder's lock moved with the hand-off: the waiter, re-sent to b, gets it only when the
    // holder's release (retried until a connection to b is back) reaches b.
    const ticketPromise = waiting;
    expect(await holder.release()).toBe('released');
    const ticket = await ticketPromise;
    expect(ticket.token).toBeGreaterThan(holder.token);
    await ticket.release();
  });
});
