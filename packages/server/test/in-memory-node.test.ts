/**
 * A TicketingNode runs with no real I/O at all when it is given a fake clock,
 * transport and disk: a single node, a priority pair and a three-node Raft cluster serve
 * acquires over an in-memory network, on an in-memory disk, with time moved
 * by hand, while every timer, clock, file and socket call the server code
 * makes is watched (none may reach the real ones). This is the seam the
 * whole-node simulator builds on.
 */
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../src/config/load.js';
import { TicketingNode } from '../src/node/ticketing-node.js';
import { ManualClock } from '../src/seams/clock.js';
import type { Stream } from '../src/seams/transport.js';
import { MemoryDisk } from './fakes/memory-disk.js';
import { run, TEST_TOKEN } from './fakes/fake-peer.js';
import { MemoryTransport } from './fakes/memory-transport.js';

const logger = pino({ level: 'silent' });
/** Calls into the world made directly by server code (not by tests, fakes or vitest). */
const leaks: string[] = [];

beforeEach(() => {
  leaks.length = 0;
  const watch = <T extends object>(target: T, name: keyof T & string) => {
    const real = target[name] as (...args: unknown[]) => unknown;
    vi.spyOn(target, name as never).mockImplementation(((...args: unknown[]) => {
      const frames = (new Error().stack ?? '').split('\n');
      const caller = frames[frames.findIndex((f) => f.includes('@vitest/spy')) + 1] ?? '';
      if (caller.includes('packages/server/src/')) leaks.push(`${name} from ${caller.trim()}`);
      return real.apply(target, args);
    }) as never);
  };
  watch(globalThis, 'setTimeout');
  watch(globalThis, 'setInterval');
  watch(globalThis, 'setImmediate');
  watch(Date, 'now');
  watch(performance, 'now');
  watch(Math, 'random');
});

afterEach(() => {
  vi.restoreAllMocks();
});

/** Shuts the nodes down, moving time on meanwhile (a shutdown waits, on the node's clock, for clients to read their last replies). */
async function stop(clock: ManualClock, nodes: TicketingNode[]): Promise<void> {
  let done = false;
  const all = Promise.all(nodes.map(async (n) => n.shutdown())).then(() => (done = true));
  for (let t = 0; t < 10_000 && !done; t += 100) await run(clock, 100);
  await all;
}

/** A client connection over the in-memory network: what it has read so far. */
function client(transport: MemoryTransport, address: string): { stream: Stream; read: () => string } {
  const [host, port] = address.split(':');
  let got = '';
  const stream = transport.connect({ host: host!, port: Number(port) }, () => {});
  stream.on('data', (chunk) => (got += chunk.toString()));
  return { stream, read: () => got };
}

describe('a node on fake seams', () => {
  it('serves a single node with no real timer, clock, file or socket', async () => {
    const clock = new ManualClock();
    const transport = new MemoryTransport();
    const disk = new MemoryDisk();
    const config = loadConfig({ node: 'solo', listen: '10.0.0.1:5225', 'data-dir': '/data/solo' });
    const node = await TicketingNode.start(config, { logger, clock, transport, disk, random: () => 0.5 });
    expect([...disk.files.keys()].sort()).toEqual(['/data/solo/FORMAT', '/data/solo/LOCK', '/data/solo/token-high-water']);

    const c = client(transport, node.listenAddress);
    c.stream.write('A k 0 1\nA k 5 1\n');
    await run(clock, 20);
    expect(c.read()).toMatch(/^A (\d+) k\n$/);
    const first = BigInt(/^A (\d+)/.exec(c.read())![1]!);
    await run(clock, 1_100); // the 1 s lease runs out on the fake clock: the waiter gets the key
    expect(c.read()).toBe(`A ${first} k\nA ${first + 1n} k\n`);

    await stop(clock, [node]);
    // The data-directory lock is released (the file stays, for whoever locks it next).
    disk.lockFile('/data/solo/LOCK')!.release();
    expect(leaks).toEqual([]);
  });

  it('elects a Raft leader and serves through it, on an in-memory network and disk', async () => {
    const clock = new ManualClock();
    const transport = new MemoryTransport();
    const disk = new MemoryDisk();
    const peers = ['a=10.0.0.1:5225', 'b=10.0.0.2:5225', 'c=10.0.0.3:5225'];
    let seed = 1;
    const random = () => ((seed = (seed * 16807) % 2147483647) / 2147483647);
    const nodes = await Promise.all(
      ['a', 'b', 'c'].map(async (name, i) =>
        TicketingNode.start(loadConfig({ mode: 'raft', node: name, peers, 'peer-token': TEST_TOKEN, listen: `10.0.0.${i + 1}:5225`, 'data-dir': `/data/${name}` }), {
          logger,
          clock,
          transport,
          disk,
          random,
        }),
      ),
    );
    let leader: TicketingNode | undefined;
    for (let t = 0; t < 10_000 && leader === undefined; t += 100) {
      await run(clock, 100);
      leader = nodes.find((n) => n.role === 'leader');
    }
    expect(leader).toBeDefined();

    const c = client(transport, leader!.listenAddress);
    c.stream.write('A k 0 30\nP\n');
    await run(clock, 200);
    expect(c.read()).toMatch(/^A \d+ k\nP\n$/);
    expect([...disk.files.keys()].filter((f) => f.includes('/raft/wal-'))).toHaveLength(3);

    await stop(clock, nodes);
    expect(leaks).toEqual([]);
  });

  it('runs a priority cluster: the first node serves, the standby replicates its locks', async () => {
    const clock = new ManualClock();
    const transport = new MemoryTransport();
    const disk = new MemoryDisk();
    const peers = ['a=10.0.0.1:5225', 'b=10.0.0.2:5225'];
    const nodes = await Promise.all(
      ['a', 'b'].map(async (name, i) =>
        TicketingNode.start(loadConfig({ node: name, peers, 'peer-token': TEST_TOKEN, listen: `10.0.0.${i + 1}:5225`, 'data-dir': `/data/${name}` }), { logger, clock, transport, disk }),
      ),
    );
    const [a, b] = nodes as [TicketingNode, TicketingNode];
    for (let t = 0; t < 10_000 && !(a.role === 'active' && b.role === 'standby'); t += 100) await run(clock, 100);
    expect([a.role, b.role]).toEqual(['active', 'standby']);

    const c = client(transport, a.listenAddress);
    c.stream.write('A k 0 30\n');
    for (let t = 0; t < 2_000 && b.status().locks.held === 0; t += 100) await run(clock, 100);
    expect(c.read()).toMatch(/^A \d+ k\n$/);
    expect(b.status().locks.held).toBe(1);

    await stop(clock, nodes);
    expect(leaks).toEqual([]);
  });
});
