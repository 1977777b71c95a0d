#!/usr/bin/env node
// The client in one page. Needs a server: `bin/ticketing server --memory`
// (or TICKETING_ADDR=host:port). Run: node examples/quickstart.mjs
import { TicketBroker, TimeoutError } from '@ticketing/client';

const broker = TicketBroker.connect(process.env.TICKETING_ADDR ?? '127.0.0.1:5225');
broker.on('error', (err) => console.error('background release failed:', err.message));
await broker.waitReady(5_000);

// 1. Explicit acquire and release.
const ticket = await broker.acquire('orders/42', { waitMs: 5_000, leaseMs: 30_000, minWorkMs: 2_000 });
console.log(`holding ${ticket.key} with token ${ticket.token}, ${Math.round(ticket.remainingMs())} ms left`);
// ... write to the resource, fenced by ticket.token (see @ticketing/fence) ...
console.log('release:', await ticket.release()); // 'released' or 'not-held'

// 2. Dispose: a bounded best-effort release that never throws. TypeScript
//    (and Node 24+) write this as `await using t = await broker.acquire(...)`.
const t = await broker.acquire('orders/42', { waitMs: 5_000, leaseMs: 30_000 });
try {
  // Someone else trying now gets TimeoutError at once with waitMs: 0.
  await broker.acquire('orders/42', { waitMs: 0, leaseMs: 30_000 });
} catch (err) {
  if (!(err instanceof TimeoutError)) throw err;
  console.log(`busy, as expected: ${err.code}; held under token ${t.token}`);
} finally {
  await t[Symbol.asyncDispose]();
}

// 3. using(): acquire, run, release; `signal` aborts when the lease ends.
const total = await broker.using('orders/42', { waitMs: 5_000, leaseMs: 10_000 }, async (t, signal) => {
  signal.throwIfAborted(); // check before each step of long work
  return `charged under token ${t.token}`;
});
console.log(total);

await broker.close();
