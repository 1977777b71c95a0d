/**
 * A priority cluster's replication against its replies, on fake seams (no
 * real I/O): every write node a makes is recorded in order, on its client
 * connections and on its peer links.
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/load.js';
import { TicketingNode } from '../src/node/ticketing-node.js';
import { ManualClock } from '../src/seams/clock.js';
import type { ConnectOptions, Listener, ListenOptions, Stream, Transport } from '../src/seams/transport.js';
import { run, TEST_TOKEN } from './fakes/fake-peer.js';
import { MemoryDisk } from './fakes/memory-disk.js';
import { MemoryTransport } from './fakes/memory-transport.js';

const logger = pino({ level: 'silent' });

/** What a node wrote, in order: [which stream, text]. */
type WriteLog = Array<[string, string]>;

function recorded(stream: Stream, label: string, log: WriteLog): Stream {
  return new Proxy(stream, {
    get(target, prop) {
      if (prop === 'write') return (d: string | Uint8Array) => (log.push([label, d.toString()]), target.write(d));
      const v = (target as unknown as Record<string | symbol, unknown>)[prop];
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/** The same network, with every write of the node using it recorded. */
class RecordingTransport implements Transport {
  readonly log: WriteLog = [];
  constructor(private readonly inner: Transport) {}
  async listen(options: ListenOptions, onStream: (stream: Stream) => void): Promise<Listener> {
    return this.inner.listen(options, (s) => onStream(recorded(s, `accepted on ${options.port}`, this.log)));
  }
  connect(options: ConnectOptions, onConnect: () => void): Stream {
    return recorded(this.inner.connect(options, onConnect), `to ${options.host}:${options.port}`, this.log);
  }
}

async function pair(extra: Record<string, unknown> = {}) {
  const clock = new ManualClock();
  const network = new MemoryTransport();
  const recording = new RecordingTransport(network);
  const disk = new MemoryDisk();
  const peers = ['a=10.0.0.1:5225', 'b=10.0.0.2:5225'];
  const nodes = await Promise.all(
    ['a', 'b'].map(async (name, i) =>
      TicketingNode.start(loadConfig({ node: name, peers, listen: `10.0.0.${i + 1}:5225`, memory: true, 'peer-token': TEST_TOKEN, ...extra }), {
        logger,
        clock,
        transport: name === 'a' ? recording : network,
        disk,
      }),
    ),
  );
  const [a, b] = nodes as [TicketingNode, TicketingNode];
  for (let t = 0; t < 10_000 && !(a.role === 'active' && b.role === 'standby' && a.status().peers[0]?.lag === 0); t += 100) await run(clock, 100);
  expect([a.role, b.role]).toEqual(['active', 'standby']);
  const stop = async () => {
    let done = false;
    const all = Promise.all(nodes.map(async (n) => n.shutdown())).then(() => (done = true));
    for (let t = 0; t < 10_000 && !done; t += 100) await run(clock, 100);
    await all;
  };
  return { clock, network, log: recording.log, a, b, stop };
}

function client(transport: Transport, address: string): { stream: Stream; read: () => string } {
  const [host, port] = address.split(':');
  let got = '';
  const stream = transport.connect({ host: host!, port: Number(port) }, () => {});
  stream.on('data', (chunk) => (got += chunk.toString()));
  return { stream, read: () => got };
}

describe('priority replication and replies', () => {
  it('defect 6: a grant is written to the standby before its reply is written to the client', async () => {
    const { clock, network, log, a, stop } = await pair();
    const c = client(network, a.listenAddress);
    log.length = 0;
    c.stream.write('A k 0 30\n');
    await run(clock, 20);
    const reply = /^A (\d+) k\n$/.exec(c.read());
    expect(reply).not.toBeNull();
    const replicated = log.findIndex(([to, text]) => to === 'to 10.0.0.2:5226' && text.includes(`G k 30000 ${reply![1]}`));
    const answered = log.findIndex(([to, text]) => to === 'accepted on 5225' && text.includes(`A ${reply![1]} k`));
    expect(replicated).toBeGreaterThanOrEqual(0);
    expect(answered).toBeGreaterThan(replicated);
    await stop();
  });

  it('a graceful hand-off under load: the successor takes over and stays active (the old active last said "active")', async () => {
    const { clock, network, a, b, stop } = await pair();
    const c = client(network, a.listenAddress);
    c.stream.write(Array.from({ length: 50 }, (_, i) => `A k${i} 0 30\n`).join(''));
    await run(clock, 20);
    // More requests in flight, and the standby a few commands behind, when the stop comes.
    c.stream.write(Array.from({ length: 50 }, (_, i) => `A m${i} 0 30\n`).join(''));
    let stopped = false;
    const stopping = a.shutdown().then(() => (stopped = true));
    for (let t = 0; t < 12_000 && !stopped; t += 100) await run(clock, 100);
    expect(stopped).toBe(true);
    await stopping;
    expect(b.role).toBe('active');
    for (let t = 0; t < 1_000; t += 10) {
      await run(clock, 10);
      expect(b.role).toBe('active');
    }
    expect(b.status().locks.held).toBeGreaterThanOrEqual(50);
    await stop();
  });

  it('--sync-standbys 1 holds each reply until the standby acknowledged its grant', async () => {
    const { clock, network, log, a, b, stop } = await pair({ 'sync-standbys': 1, 'sync-standbys-allow-stall': true });
    const c = client(network, a.listenAddress);
    log.length = 0;
    c.stream.write('A k 0 30\n');
    await run(clock, 200);
    expect(c.read()).toMatch(/^A \d+ k\n$/);
    expect(b.status().locks.held).toBe(1);
    expect(a.status().replication?.tableConfirmed).toBe(true);
    // Without a standby to acknowledge, replies wait.
    await b.shutdown('test', 0).catch(() => {});
    for (let t = 0; t < 3_000 && a.status().peers[0]?.reachable !== false; t += 100) await run(clock, 100);
    c.stream.write('A k2 0 30\n');
    await run(clock, 500);
    expect(c.read()).not.toMatch(/k2/);
    expect(a.status().replication).toMatchObject({ standbysAcking: 0, syncStandbys: 1, alone: true, tableConfirmed: true });
    await stop();
  });
});
