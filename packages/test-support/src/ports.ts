/**
 * Free loopback ports for servers that must be told their port before they
 * start (a cluster's peers cannot use port 0): the project's allocator, the
 * same policy in the JVM and Python tests.
 *
 * Ports come from below the kernel's ephemeral range, so that no outgoing
 * connection (of this test or a parallel one) takes a port between this
 * check and the server's listen, or while a test restarts a server on it.
 * Each process walks the range from a random start and never hands out a
 * port twice (until it wraps), so a port a test still counts on (a node it
 * killed and will restart) is not given to another test in the meantime,
 * and parallel processes rarely meet.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';

function ephemeralLow(): number {
  try {
    return Number(/^(\d+)/.exec(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8'))?.[1] ?? 32768);
  } catch {
    return 32768; // not Linux: the usual default
  }
}

/** The range handed out: [LOW, HIGH), below the ephemeral ports. */
export const PORT_RANGE = { low: 10_000, high: ephemeralLow() } as const;
const SPAN = PORT_RANGE.high - PORT_RANGE.low - 1;
let cursor = Math.floor(Math.random() * SPAN);

/** The next candidate port P (P+1 stays in the range too). */
function nextCandidate(): number {
  const port = PORT_RANGE.low + cursor;
  cursor = (cursor + 2) % SPAN;
  return port;
}

async function listen(port: number): Promise<Server | undefined> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(undefined));
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

async function close(server: Server): Promise<void> {
  await new Promise((r) => server.close(r));
}

/** One free port, for a server that is given its port (a database, a load generator). */
export async function freePort(): Promise<number> {
  return (await freePortPairs(1))[0]!;
}

/**
 * `count` distinct ports P, each with P+1 free too. All are held until every
 * one is found, so the same call never returns overlapping pairs.
 */
export async function freePortPairs(count: number): Promise<number[]> {
  const held: Server[] = [];
  const ports: number[] = [];
  for (let tries = 0; ports.length < count; tries++) {
    if (tries > SPAN) throw new Error(`no ${count} free port pairs in ${PORT_RANGE.low}-${PORT_RANGE.high}`);
    const port = nextCandidate();
    const a = await listen(port);
    if (a === undefined) continue;
    held.push(a);
    const b = await listen(port + 1);
    if (b === undefined) continue;
    held.push(b);
    ports.push(port);
  }
  await Promise.all(held.map(close));
  return ports;
}

/** One port P with P+1 free too (a cluster node's client and peer ports). */
export async function freePortPair(): Promise<number> {
  return (await freePortPairs(1))[0]!;
}
