/**
 * Free loopback ports for configs that must name their ports (a cluster's
 * peers cannot use port 0). Each port's successor is free too: it is the
 * peer port. Chosen below the kernel's ephemeral range, so that no outgoing
 * connection of a parallel test takes one between the check and the start.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';

const EPHEMERAL_LOW = Number(/^(\d+)/.exec(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8'))?.[1] ?? 32768);
const LOW = 10_000;

async function listen(port: number): Promise<Server | undefined> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(undefined));
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

export async function freePorts(count: number): Promise<number[]> {
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
  await Promise.all(held.map(async (s) => new Promise((r) => s.close(r))));
  return ports;
}
