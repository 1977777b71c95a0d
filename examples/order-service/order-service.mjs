#!/usr/bin/env node
// An order service with two workers that both try to charge every order.
// The lock makes them take turns; the fencing token, checked in the same
// transaction as the charge, makes a worker whose lease ran out (here: a
// simulated 2.5 s pause on order-1) harmless: its late charge is rejected.
//
//   bin/ticketing server --memory &                # or any Ticketing server
//   node examples/order-service/order-service.mjs  # TICKETING_ADDR=host:port to point elsewhere
import Database from 'better-sqlite3';
import { TicketBroker } from '@ticketing/client';
import { StaleTokenError, fenceSync, migrateSync } from '@ticketing/fence';

const address = process.env.TICKETING_ADDR ?? '127.0.0.1:5225';
const run = Date.now().toString(36); // fresh keys for every run of the example
const orders = ['order-1', 'order-2', 'order-3'];
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const db = new Database(':memory:');
migrateSync(db);
db.exec(`
  CREATE TABLE orders   (id TEXT PRIMARY KEY, amount_cents INTEGER NOT NULL, status TEXT NOT NULL DEFAULT 'new');
  CREATE TABLE payments (order_id TEXT NOT NULL, worker TEXT NOT NULL, token TEXT NOT NULL);
`);
for (const id of orders) db.prepare('INSERT INTO orders (id, amount_cents) VALUES (?, 1999)').run(id);

/** The protected write: fence, then charge, in one transaction (a stale token rolls it all back). */
const charge = db.transaction((worker, id, token) => {
  fenceSync(db, `orders/${run}/${id}`, token);
  db.prepare('INSERT INTO payments (order_id, worker, token) VALUES (?, ?, ?)').run(id, worker, token.toString());
  db.prepare("UPDATE orders SET status = 'charged' WHERE id = ?").run(id);
});

// The lease is counted from when the acquire was sent, so time spent waiting
// in the queue counts against it: give it room for the wait plus the work.
async function worker(name, { pauseOn, leaseMs = 15_000 } = {}) {
  const broker = TicketBroker.connect(address);
  broker.on('error', (err) => console.log(`${name}: ${err.message}`));
  await broker.waitReady(5_000);
  try {
    for (const id of orders) {
      try {
        await broker.using(`orders/${run}/${id}`, { waitMs: 10_000, leaseMs, minWorkMs: 500 }, async (ticket) => {
          const { status } = db.prepare('SELECT status FROM orders WHERE id = ?').get(id);
          if (id === pauseOn) {
            console.log(`${name}: holds ${id} with token ${ticket.token}, then stalls past its lease`);
            await sleep(leaseMs + 500);
          } else if (status === 'charged') {
            console.log(`${name}: ${id} is already charged`);
            return;
          }
          charge(name, id, ticket.token);
          console.log(`${name}: charged ${id} with token ${ticket.token}`);
        });
      } catch (err) {
        if (!(err instanceof StaleTokenError)) throw err;
        console.log(`${name}: rejected on ${id}: ${err.message}`);
      }
    }
  } finally {
    await broker.close();
  }
}

// worker-2 starts a moment later, so worker-1 holds order-1 first.
await Promise.all([worker('worker-1', { pauseOn: 'order-1', leaseMs: 2_000 }), sleep(100).then(() => worker('worker-2'))]);

const payments = db.prepare('SELECT order_id, worker, token FROM payments ORDER BY order_id').all();
console.table(payments);
const twice = db.prepare('SELECT order_id FROM payments GROUP BY order_id HAVING count(*) > 1').all();
const unpaid = db.prepare("SELECT id FROM orders WHERE status <> 'charged'").all();
if (twice.length > 0 || unpaid.length > 0) {
  console.log(`WRONG: charged twice ${JSON.stringify(twice)}, not charged ${JSON.stringify(unpaid)}`);
  process.exit(1);
}
console.log('every order was charged exactly once');
