/**
 * Faults between the client and the real server: a TCP proxy cuts links
 * before a request is written, after it went through, after its reply, and
 * holds replies back; and the server is killed mid-acquire.
 */
import { afterEach, beforeAll, afterAll, describe, expect, it } from 'vitest';
import {
  IndeterminateError,
  InsufficientLeaseError,
  NoConnectionError,
  ReleaseFailedError,
  TicketBroker,
} from '../../packages/client/src/index.js';
import { timing } from '../../packages/client/src/timing.js';
import { eventually, type RunningServer, sleep, startServer, TcpProxy, tokenOf, Wire } from '@ticketing/test-support';
import { rejection, uniqueKey as k } from './helpers/client.js';

let server: RunningServer;
let wire: Wire;
const defaults = { ...timing };
const cleanup: Array<() => Promise<void>> = [];

beforeAll(async () => {
  server = await startServer();
  wire = await Wire.open(server.port, server.host);
});
afterAll(async () => {
  wire.destroy();
  await server.stop();
});
afterEach(async () => {
  Object.assign(timing, defaults);
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** A broker behind a fresh proxy (one address: two connections, two links). */
async function proxied(): Promise<{ proxy: TcpProxy; broker: TicketBroker }> {
  const proxy = await TcpProxy.start(server.port, { lines: true });
  const broker = TicketBroker.connect(proxy.address);
  const errors: Error[] = [];
  broker.on('error', (e) => errors.push(e));
  cleanup.push(async () => {
    await broker.close();
    await proxy.close();
  });
  await broker.waitReady(5_000);
  await eventually('both connections up', () => proxy.openLinks.length === 2 && proxy.openLinks.every((l) => l.sent.length > 0));
  await sleep(20); // both H replies in
  return { proxy, broker };
}

const acquiresSent = (proxy: TcpProxy, key: string) => proxy.links.flatMap((l) => l.sent).filter((l) => l.startsWith(`A ${key} `));

async function heldToken(key: string): Promise<bigint | undefined> {
  const reply = await wire.ask(`A ${key} 0 1`);
  if (reply === `T ${key}`) return -1n;
  await wire.ask(`R ${key} ${tokenOf(reply)}`);
  return undefined;
}

describe('cut before the write', () => {
  it('skips a connection known dead and acquires on the next one', async () => {
    const { proxy, broker } = await proxied();
    proxy.links[0]!.cut();
    await sleep(100); // the client sees the close
    const key = k();
    for (let i = 0; i < 3; i++) {
      const t = await broker.acquire(`${key}-${i}`, { waitMs: 0, leaseMs: 5_000 });
      await t.release();
    }
    expect(proxy.links[0]!.sent.filter((l) => l.startsWith('A '))).toEqual([]);
  });

  it('rejects with NoConnectionError, having sent nothing, when every connection is dead', async () => {
    const { proxy, broker } = await proxied();
    proxy.cut(); // and refuse new ones: a dropped connection is retried at once
    await sleep(100);
    const key = k();
    await rejection(broker.acquire(key, { waitMs: 0, leaseMs: 5_000 }), NoConnectionError);
    expect(acquiresSent(proxy, key)).toEqual([]);
  });
});

describe('cut after the write', () => {
  it('is Indeterminate when the reply is lost, and never re-sends the acquire', async () => {
    const { proxy, broker } = await proxied();
    const key = k();
    for (const l of proxy.links) l.onRequest = (line) => (line.startsWith(`A ${key} `) ? 'cut' : 'forward');
    const err = await rejection(broker.acquire(key, { waitMs: 0, leaseMs: 2_000 }), IndeterminateError);
    expect(err.key).toBe(key);
    // The server did grant it: exactly why the client must not claim either outcome.
    expect(await heldToken(key)).toBe(-1n);
    await sleep(200);
    expect(acquiresSent(proxy, key)).toHaveLength(1);
  });

  it('is Indeterminate when the server is killed mid-acquire', async () => {
    const own = await startServer();
    const broker = TicketBroker.connect(own.address);
    cleanup.push(async () => broker.close());
    await broker.waitReady(5_000);
    const key = k();
    const holder = await broker.acquire(key, { waitMs: 0, leaseMs: 30_000 });
    const waiting = broker.acquire(key, { waitMs: 30_000, leaseMs: 30_000 });
    const outcome = rejection(waiting, IndeterminateError);
    await sleep(100);
    await own.stop('SIGKILL');
    expect((await outcome).key).toBe(key);
    void holder;
  });
});

describe('cut after the reply', () => {
  it('keeps the ticket and releases it over the other connection', async () => {
    const { proxy, broker } = await proxied();
    const key = k();
    const ticket = await broker.acquire(key, { waitMs: 0, leaseMs: 10_000 });
    const carrier = proxy.links.find((l) => l.sent.some((s) => s.startsWith(`A ${key} `)))!;
    carrier.cut();
    await sleep(100);
    expect(ticket.remainingMs()).toBeGreaterThan(5_000);
    expect(await ticket.release()).toBe('released');
    expect(carrier.sent.filter((l) => l.startsWith('R '))).toEqual([]);
    expect(await heldToken(key)).toBeUndefined();
  });
});

describe('release retries', () => {
  it('re-sends the exact token on another connection when the first attempt is cut before reaching the server', async () => {
    const { proxy, broker } = await proxied();
    const key = k();
    const ticket = await broker.acquire(key, { waitMs: 0, leaseMs: 10_000 });
    let first = true;
    for (const l of proxy.links) l.onRequest = (line) => (line.startsWith('R ') && first ? ((first = false), 'drop') : 'forward');
    expect(await ticket.release()).toBe('released');
    const releases = proxy.links.flatMap((l) => l.sent).filter((l) => l.startsWith('R '));
    expect(releases).toEqual([`R ${key} ${ticket.token}`, `R ${key} ${ticket.token}`]);
  });

  it("answers not-held when the first attempt released it but its reply was lost", async () => {
    const { proxy, broker } = await proxied();
    const key = k();
    const ticket = await broker.acquire(key, { waitMs: 0, leaseMs: 10_000 });
    let first = true;
    for (const l of proxy.links) l.onRequest = (line) => (line.startsWith('R ') && first ? ((first = false), 'cut') : 'forward');
    expect(await ticket.release()).toBe('not-held');
    expect(await heldToken(key)).toBeUndefined();
  });

  it('waits for a connection to come back, polling, within the 5 s window', async () => {
    timing.reconnectMs = 500;
    const { proxy, broker } = await proxied();
    const key = k();
    const ticket = await broker.acquire(key, { waitMs: 0, leaseMs: 10_000 });
    proxy.cutAll();
    await sleep(50);
    expect(await ticket.release()).toBe('released');
  });

  it('rejects with ReleaseFailedError when no attempt gets a reply within the window, never assuming success', async () => {
    timing.releaseWindowMs = 1_000;
    timing.reconnectMs = 60_000;
    const { proxy, broker } = await proxied();
    const key = k();
    const ticket = await broker.acquire(key, { waitMs: 0, leaseMs: 10_000 });
    proxy.cut();
    const t0 = performance.now();
    const err = await rejection(ticket.release(), ReleaseFailedError);
    expect(err.code).toBe('RELEASE_FAILED');
    expect(err.token).toBe(ticket.token);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(900);
    expect(await heldToken(key)).toBe(-1n); // still held: the error was right not to claim success
  });

  it('reports a failed release from `await using` through the error event, without throwing', async () => {
    timing.releaseWindowMs = 500;
    timing.reconnectMs = 60_000;
    const { proxy, broker } = await proxied();
    const errors: Error[] = [];
    broker.on('error', (e) => errors.push(e));
    {
      await using ticket = await broker.acquire(k(), { waitMs: 0, leaseMs: 10_000 });
      void ticket;
      proxy.cut();
    }
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(ReleaseFailedError);
  });
});

describe('slow replies', () => {
  it('counts the lease from the write, so a late grant leaves less time', async () => {
    const { proxy, broker } = await proxied();
    // Replies are held for 1.5 s from the moment the acquire passes the proxy.
    for (const l of proxy.links) {
      l.onRequest = (line) => {
        if (line.startsWith('A ')) l.hold = sleep(1_500);
        return 'forward';
      };
    }
    const ticket = await broker.acquire(k(), { waitMs: 0, leaseMs: 10_000 });
    expect(ticket.remainingMs()).toBeLessThanOrEqual(8_500);
    for (const l of proxy.links) l.hold = undefined;
    await ticket.release();
  });

  it('refuses a grant that arrives after its lease ran out, and releases that token', async () => {
    const { proxy, broker } = await proxied();
    for (const l of proxy.links) l.hold = sleep(1_200);
    const key = k();
    const err = await rejection(broker.acquire(key, { waitMs: 0, leaseMs: 1_000 }), InsufficientLeaseError);
    expect(err.remainingMs).toBeLessThanOrEqual(0);
    for (const l of proxy.links) l.hold = undefined;
    // The compensating release was sent with exactly that token.
    await eventually('compensating release sent', () => proxy.links.some((l) => l.sent.includes(`R ${key} ${err.token}`)));
  });
});
