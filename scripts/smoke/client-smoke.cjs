// Smoke test of the installed @ticketing/client through require() (Node.js 22.12+).
const { TicketBroker } = require('@ticketing/client');

(async () => {
  const broker = TicketBroker.connect(process.env.TICKETING_ADDR);
  await broker.waitReady(5_000);
  const t = await broker.acquire('smoke/cjs', { waitMs: 0, leaseMs: 10_000 });
  if (typeof t.token !== 'bigint' || (await t.release()) !== 'released') throw new Error('bad ticket');
  await broker.close();
  console.log(`require ok ${t.token}`);
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
