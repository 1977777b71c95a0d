/**
 * Free loopback ports for servers that must be told their port before they
 * start (a cluster's peers cannot use port 0).
 *
 * Each port this returns has a free successor: a node listens for clients on
 * P and for peers on P+1. They are chosen below the kernel's ephemeral range,
 * so that no outgoing connection of a parallel test takes one between this
 * check and the server's listen.
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

const EPHEMERAL_LOW = ephemeralLow();
const LOW = 10_000;

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

/** Any free port the kernel picks (for a server that is then given it, when port 0 will not do). */
export async function freePort(): Promise<number> {
  const server = (await listen(0))!;
  const { port } = server.address() as { port: number };
  await close(server);
  return port;
}

/**
 * `count` distinct ports P, each with P+1 free too. All are held until every
 * one is found, so the same call never returns overlapping pairs.
 */
export async function freePortPairs(count: number): Promise<number[]> {
  const held: Server[] = [];
  const ports: number[] = [];
  while (ports.length < count) {
    const port = LOW + Math.floor(Math.random() * (EPHEMERAL_LOW - LOW - 1));
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
