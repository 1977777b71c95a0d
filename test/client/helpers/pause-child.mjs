// A client process for the SIGSTOP test: acquires TICKETING_KEY (wait 3 s, lease 30 s) and prints
// one JSON line with the outcome; on a ticket, releases it and prints the release result.
// CLIENT_DIST: the client build to use (default: this checkout's packages/client/dist).
import { pathToFileURL } from 'node:url';

const dist = process.env.CLIENT_DIST ?? new URL('../../../packages/client/dist/index.js', import.meta.url).pathname;
const { TicketBroker } = await import(pathToFileURL(dist).href);
const broker = TicketBroker.connect(process.env.TICKETING_ADDR);
broker.on('error', () => {});
await broker.waitReady(5_000);
const say = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
say({ ready: true });
// "go" on stdin: the key is held now, so the acquire queues.
await new Promise((resolve) => process.stdin.once('data', resolve));
process.stdin.pause();
const acquire = broker.acquire(process.env.TICKETING_KEY, { waitMs: 3_000, leaseMs: 30_000 });
setTimeout(() => say({ sent: true }), 300);
try {
  const ticket = await acquire;
  say({ token: String(ticket.token), remainingMs: ticket.remainingMs() });
  say({ release: await ticket.release() });
} catch (err) {
  say({ error: err.code ?? String(err) });
}
await broker.close();
