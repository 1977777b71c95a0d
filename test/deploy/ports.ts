/**
 * Free loopback ports for configs that must name their ports (a cluster's
 * peers cannot use port 0). Each port's successor is free too, for a peer
 * port that may default to client port + 1.
 */
import { createServer, type Server } from 'node:net';

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
    const a = await listen(0);
    if (a === undefined) continue;
    held.push(a);
    const port = (a.address() as { port: number }).port;
    const b = port < 65535 ? await listen(port + 1) : undefined;
    if (b === undefined) continue;
    held.push(b);
    ports.push(port);
  }
  await Promise.all(held.map(async (s) => new Promise((r) => s.close(r))));
  return ports;
}
