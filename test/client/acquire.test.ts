/**
 * The client against the real server binary: acquire, release, tickets,
 * dispose, using(), pipelining, close().
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CapacityError,
  ClosedError,
  InsufficientLeaseError,
  LeaseEndedError,
  NoConnectionError,
  ReleasedError,
  TicketBroker,
  TimeoutError,
} from '../../packages/client/src/index.js';
import { adminStatus, eventually, type RunningServer, startServer, TcpProxy, tokenOf, Wire } from '@ticketing/test-support';
import { rejection, uniqueKey as k } from './helpers/client.js';

let server: RunningServer;
let broker: TicketBroker;
/** A raw connection to ask the server what it holds. */
let wire: Wire;

beforeAll(async () => {
  server = await startServer();
  broker = TicketBroker.connect(server.address);
  await broker.waitReady(5_000);
  wire = await Wire.open(server.port, server.host);
});
afterAll(async () => {
  wire.destroy();
  await broker.close();
  await server.stop();
});

/** True if `key` is held on the server right now (a wait-0 probe, released again at once). */
async function isHeld(key: string): Promise<boolean> {
  const reply = await wire.ask(`A ${key} 0 1`);
  if (reply === `T ${key}`) return true;
  expect(await wire.ask(`R ${key} ${tokenOf(reply)}`)).toBe(`R ${key}`);
  return false;
}

describe('acquire and release', () => {
  it('grants a ticket with an exact bigint token and the conservative lease, and releases it', async () => {
    const key = k();
    const t0 = performance.now();
    const ticket = await broker.acquire(key, { waitMs: 0, leaseMs: 30_000 });
    expect(typeof ticket.token).toBe('bigint');
    expect(ticket.token).toBeGreaterThan(0n);
    expect(ticket.key).toBe(key);
    // The bound first: remainingMs() read after it can only be smaller. The lease counts from the
    // send, a moment after t0 (slack for a loaded machine).
    const atMost = 30_000 - (performance.now() - t0) + 100;
    expect(ticket.remainingMs()).toBeLessThanOrEqual(atMost);
    expect(ticket.remainingMs()).toBeGreaterThan(25_000);
    expect(await isHeld(key)).toBe(true);
    expect(await ticket.release()).toBe('released');
    expect(await isHeld(key)).toBe(false);
  });

  it('returns the first promise when release is called again, and says not-held for a token that is gone', async () => {
    const key = k();
    const ticket = await broker.acquire(key, { waitMs: 0, leaseMs: 30_000 });
    const first = ticket.release();
    expect(ticket.release()).toBe(first);
    expect(await first).toBe('released');
    expect(await broker.release(key, ticket.token)).toBe('not-held');
  });

  it('rounds durations up to whole seconds: leaseMs 500 is a 1 s lease', async () => {
    const key = k();
    const ticket = await broker.acquire(key, { waitMs: 0, leaseMs: 500 });
    expect(ticket.remainingMs()).toBeGreaterThan(500);
    expect(ticket.remainingMs()).toBeLessThanOrEqual(1_000);
    await ticket.release();
  });

  it('hands the lock to a waiting acquire when the holder releases, with a larger token', async () => {
    const key = k();
    const first = await broker.acquire(key, { waitMs: 0, leaseMs: 30_000 });
    const second = broker.acquire(key, { waitMs: 10_000, leaseMs: 30_000 });
    await first.release();
    const ticket = await second;
    expect(ticket.token).toBeGreaterThan(first.token);
    await ticket.release();
  });

  it('rejects with TimeoutError on T, at once for waitMs 0 and after the wait otherwise', async () => {
    const key = k();
    const holder = await broker.acquire(key, { waitMs: 0, leaseMs: 30_000 });
    const err = await rejection(broker.acquire(key, { waitMs: 0, leaseMs: 30_000 }), TimeoutError);
    expect(err.code).toBe('TIMEOUT');
    expect(err.key).toBe(key);
    const t0 = performance.now();
    await rejection(broker.acquire(key, { waitMs: 1_000, leaseMs: 30_000 }), TimeoutError);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(900);
    await holder.release();
  });

  it('refuses a grant with less lease left than minWorkMs, and releases that token', async () => {
    const key = k();
    // A budget equal to the rounded lease is accepted (CLIENT.md: 0..lease inclusive) and
    // sent, but can never be met: some time always passes after the send.
    const err = await rejection(broker.acquire(key, { waitMs: 0, leaseMs: 1_000, minWorkMs: 1_000 }), InsufficientLeaseError);
    expect(err.code).toBe('INSUFFICIENT_LEASE');
    expect(err.remainingMs).toBeLessThan(1_000);
    const probe = await wire.ask(`A ${key} 2 1`);
    expect(probe).toMatch(/^A \d+ /);
    expect(tokenOf(probe)).toBeGreaterThan(err.token);
    await wire.ask(`R ${key} ${tokenOf(probe)}`);
  });

  it('pipelines many acquires and releases over the pool, each matched to its own reply', async () => {
    const keys = Array.from({ length: 300 }, () => k('pipe'));
    const tickets = await Promise.all(keys.map(async (key) => broker.acquire(key, { waitMs: 0, leaseMs: 30_000 })));
    expect(tickets.map((t) => t.key)).toEqual(keys);
    expect(new Set(tickets.map((t) => t.token)).size).toBe(keys.length);
    expect(await Promise.all(tickets.map(async (t) => t.release()))).toEqual(keys.map(() => 'released'));
  });

  it('serves several waiters of one key in FIFO order', async () => {
    const key = k();
    const holder = await broker.acquire(key, { waitMs: 0, leaseMs: 30_000 });
    const order: number[] = [];
    const waiters: Array<Promise<bigint>> = [];
    const waiting = (await adminStatus(server)).locks.waiting;
    for (const i of [0, 1, 2, 3]) {
      waiters.push(
        (async () => {
          const t = await broker.acquire(key, { waitMs: 10_000, leaseMs: 30_000 });
          order.push(i);
          await t.release();
          return t.token;
        })(),
      );
      // Requests are spread over the pool's connections: FIFO is by arrival at the server,
      // so each one is queued there before the next is made.
      await eventually(`waiter ${i} queued`, async () => (await adminStatus(server)).locks.waiting === waiting + i + 1);
    }
    await holder.release();
    const tokens = await Promise.all(waiters);
    expect(order).toEqual([0, 1, 2, 3]);
    expect([...tokens].sort((a, b) => (a < b ? -1 : 1))).toEqual(tokens);
  });
});

describe('tickets', () => {
  it('aborts ticket.signal with LeaseEndedError no later than the lease end', async () => {
    const key = k();
    const ticket = await broker.acquire(key, { waitMs: 0, leaseMs: 1_000 });
    const reason = await new Promise<unknown>((resolve) => ticket.signal.addEventListener('abort', () => resolve(ticket.signal.reason)));
    expect(reason).toBeInstanceOf(LeaseEndedError);
    expect(ticket.remainingMs()).toBe(0);
    // The server may still hold it for a moment (its lease started later): conservative, never optimistic.
    expect(await ticket.release()).toMatch(/^(released|not-held)$/);
  });

  it('aborts ticket.signal with ReleasedError on release', async () => {
    const ticket = await broker.acquire(k(), { waitMs: 0, leaseMs: 30_000 });
    expect(ticket.signal.aborted).toBe(false);
    const released = ticket.release();
    expect(ticket.signal.reason).toBeInstanceOf(ReleasedError);
    await released;
  });

  it('releases at the end of an `await using` block', async () => {
    const key = k();
    {
      await using ticket = await broker.acquire(key, { waitMs: 0, leaseMs: 30_000 });
      expect(await isHeld(ticket.key)).toBe(true);
    }
    expect(await isHeld(key)).toBe(false);
  });

  it('does nothing on dispose after an explicit release', async () => {
    const key = k();
    const ticket = await broker.acquire(key, { waitMs: 0, leaseMs: 30_000 });
    await ticket.release();
    const again = await broker.acquire(key, { waitMs: 0, leaseMs: 30_000 });
    await ticket[Symbol.asyncDispose]();
    expect(await isHeld(key)).toBe(true); // the new grant was not touched
    await again.release();
  });

  it('runs using(): acquire, call, release, also when the callback throws', async () => {
    const key = k();
    const value = await broker.using(key, { waitMs: 0, leaseMs: 30_000 }, async (ticket, signal) => {
      expect(await isHeld(ticket.key)).toBe(true);
      expect(signal.aborted).toBe(false);
      return 42;
    });
    expect(value).toBe(42);
    expect(await isHeld(key)).toBe(false);
    await expect(
      broker.using(key, { waitMs: 0, leaseMs: 30_000 }, () => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await isHeld(key)).toBe(false);
  });

  it("aborts using()'s signal when the caller's signal aborts", async () => {
    const controller = new AbortController();
    const seen = await broker.using(k(), { waitMs: 0, leaseMs: 30_000, signal: controller.signal }, (_t, signal) => {
      controller.abort(new Error('caller gave up'));
      return signal.aborted;
    });
    expect(seen).toBe(true);
  });
});

describe('capacity', () => {
  it('rejects with CapacityError on B at once, sending the acquire only once', async () => {
    const limited = await startServer(['--max-locks', '1']);
    const proxy = await TcpProxy.start(limited.port, { lines: true });
    const b = TicketBroker.connect(proxy.address);
    try {
      await b.waitReady(5_000);
      const holder = await b.acquire(k(), { waitMs: 0, leaseMs: 30_000 });
      const key = k();
      const err = await rejection(b.acquire(key, { waitMs: 5_000, leaseMs: 30_000 }), CapacityError);
      expect(err.code).toBe('CAPACITY');
      expect(proxy.links.flatMap((l) => l.sent).filter((l) => l.startsWith(`A ${key} `))).toHaveLength(1);
      await holder.release();
    } finally {
      await b.close();
      await proxy.close();
      await limited.stop();
    }
  });
});

describe('close', () => {
  it('rejects acquires in progress and later calls with ClosedError', async () => {
    const b = TicketBroker.connect(server.address);
    await b.waitReady(5_000);
    const key = k();
    const holder = await broker.acquire(key, { waitMs: 0, leaseMs: 30_000 });
    const waiting = b.acquire(key, { waitMs: 30_000, leaseMs: 30_000 });
    await new Promise((r) => setTimeout(r, 50));
    // close() rejects the waiting acquire at once, then waits for the server to close that connection.
    const closing = b.close();
    await rejection(waiting, ClosedError);
    await closing;
    expect((await rejection(b.acquire(key, { waitMs: 0, leaseMs: 1_000 }), ClosedError)).code).toBe('CLOSED');
    await rejection(b.waitReady(100), ClosedError);
    // The waiter left the server's queue with its connection: the lock is free once the holder lets go.
    await holder.release();
    expect(await isHeld(key)).toBe(false);
  });

  it('waits for a release in flight before closing', async () => {
    const b = TicketBroker.connect(server.address);
    await b.waitReady(5_000);
    const key = k();
    const ticket = await b.acquire(key, { waitMs: 0, leaseMs: 30_000 });
    const released = ticket.release();
    await b.close();
    expect(await released).toBe('released');
    expect(await isHeld(key)).toBe(false);
  });
});

describe('waitReady', () => {
  it('rejects with NoConnectionError when nothing is usable in time', async () => {
    const nothing = await TcpProxy.start(1, { lines: true }); // port 1: every upstream connection fails at once
    await nothing.close();
    const b = TicketBroker.connect(nothing.address);
    try {
      const err = await rejection(b.waitReady(300), NoConnectionError);
      expect(err.code).toBe('NO_CONNECTION');
      await rejection(b.acquire(k(), { waitMs: 0, leaseMs: 1_000 }), NoConnectionError);
    } finally {
      await b.close();
    }
  });
});
