// Smoke test of the installed @ticketing/client (ESM): acquire, release, a second holder gets a larger token.
import { TicketBroker, TimeoutError } from '@ticketing/client';

const broker = TicketBroker.connect(process.env.TICKETING_ADDR);
await broker.waitReady(5_000);
const a = await broker.acquire('smoke/esm', { waitMs: 0, leaseMs: 10_000 });
await broker.acquire('smoke/esm', { waitMs: 0, leaseMs: 10_000 }).then(
  () => { throw new Error('granted twice'); },
  (err) => { if (!(err instanceof TimeoutError)) throw err; },
);
if ((await a.release()) !== 'released') throw new Error('not released');
const b = await broker.acquire('smoke/esm', { waitMs: 0, leaseMs: 10_000 });
if (!(b.token > a.token)) throw new Error('tokens did not grow');
await b.release();
await broker.close();
console.log(`esm ok ${a.token} < ${b.token}`);
