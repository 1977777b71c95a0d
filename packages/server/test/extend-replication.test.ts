/**
 * Lease extension in both cluster modes, on fake seams (no real I/O, time
 * moved by hand): an `X` is replicated like a grant before its reply, every
 * replica counts the new lease on its own clock from when it applied it,
 * the node that takes over keeps it, and a lease timer that was about to
 * fire never expires an extended grant early.
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/load.js';
import { TicketingNode } from '../src/node/ticketing-node.js';
import { ManualClock } from '../src/seams/clock.js';
import type { Stream } from '../src/seams/transport.js';
import { LockEngine } from '../src/engine/lock-engine.js';
import { AppliedState } from '../src/raft/applied-state.js';
import type { Entry } from '../src/raft/types.js';
import { encodeCommand } from '../src/state-machine/command-codec.js';
import type { Command } from '../src/state-machine/commands.js';
import { MemoryDisk } from './fakes/memory-disk.js';
import { MemoryTransport } from './fakes/memory-transport.js';
import { run, TEST_TOKEN } from './fakes/fake-peer.js';

const logger = pino({ level: 'silent' });

async function until(clock: ManualClock, what: string, check: () => boolean, ms = 10_000): Promise<void> {
  for (let t = 0; t < ms && !check(); t += 10) await run(clock, 10);
  if (!check()) throw new Error(`not ${what} within ${ms} ms`);
}

function client(transport: MemoryTransport, address: string): { send: (text: string) => void; read: () => string } {
  const [host, port] = address.split(':');
  let got = '';
  const stream: Stream = transport.connect({ host: host!, port: Number(port) }, () => {});
  stream.on('data', (chunk) => (got += chunk.toString()));
  return { send: (text) => void stream.write(text), read: () => got };
}

async function stopAll(clock: ManualClock, nodes: TicketingNode[]): Promise<void> {
  let done = false;
  const all = Promise.all(nodes.map(async (n) => n.shutdown())).then(() => (done = true));
  for (let t = 0; t < 15_000 && !done; t += 100) await run(clock, 100);
  await all;
}

/** The record node `n` holds for `key` (its own table: active, standby or follower). */
function recordOn(n: TicketingNode, key: string) {
  return n.lockTable()?.get(key);
}

describe('lease extension in a priority cluster', () => {
  async function pair(extra: Record<string, unknown> = {}) {
    const clock = new ManualClock();
    const network = new MemoryTransport();
    const disk = new MemoryDisk();
    const peers = ['a=10.0.0.1:5225', 'b=10.0.0.2:5225'];
    const nodes = await Promise.all(
      ['a', 'b'].map(async (name, i) =>
        TicketingNode.start(loadConfig({ node: name, peers, listen: `10.0.0.${i + 1}:5225`, memory: true, 'peer-token': TEST_TOKEN, ...extra }), { logger, clock, transport: network, disk }),
      ),
    );
    const [a, b] = nodes as [TicketingNode, TicketingNode];
    await until(clock, 'active and in sync', () => a.role === 'active' && b.role === 'standby' && a.status().peers[0]?.lag === 0);
    return { clock, network, a, b, nodes };
  }

  it('replicates the new lease to the standby, which counts it from when it applied it, and keeps it after a hand-off', async () => {
    const { clock, network, a, b, nodes } = await pair();
    const c = client(network, a.listenAddress);
    c.send('A k 0 2\n');
    await until(clock, 'granted', () => /^A \d+ k\n$/.test(c.read()));
    const token = BigInt(/^A (\d+)/.exec(c.read())![1]!);
    await run(clock, 1_000);
    c.send(`X k ${token} 20\n`);
    await until(clock, 'extended', () => c.read().endsWith('X k\n'));
    await until(clock, 'replicated', () => recordOn(b, 'k')?.leaseMs === 20_000);
    expect(recordOn(b, 'k')!.token).toBe(token);
    // A graceful hand-off to b: the lock is still held on b well past the grant's 2 s lease.
    const stopping = a.shutdown();
    await until(clock, 'b active', () => b.role === 'active');
    await stopAll(clock, [a]);
    await stopping;
    await run(clock, 5_000);
    const d = client(network, b.listenAddress);
    d.send('A k 0 2\n');
    await until(clock, 'answered', () => d.read() !== '');
    expect(d.read()).toBe('T k\n');
    d.send(`X k ${token} 1\n`);
    await until(clock, 'extended on b', () => d.read().endsWith('X k\n'));
    await stopAll(clock, nodes);
  });

  it('--sync-standbys 1 holds the X reply until the standby acknowledged the extension', async () => {
    // Two nodes: the one standby must confirm every reply, a stall the config makes explicit.
    const { clock, network, a, b, nodes } = await pair({ 'sync-standbys': 1, 'sync-standbys-allow-stall': true });
    const c = client(network, a.listenAddress);
    c.send('A k 0 30\n');
    await until(clock, 'granted', () => /^A \d+ k\n$/.test(c.read()));
    const token = BigInt(/^A (\d+)/.exec(c.read())![1]!);
    c.send(`X k ${token} 60\n`);
    await until(clock, 'extended', () => c.read().endsWith('X k\n'));
    expect(recordOn(b, 'k')?.leaseMs).toBe(60_000);
    // With no standby to acknowledge, the X reply waits.
    await b.shutdown('test', 0).catch(() => {});
    await until(clock, 'b unreachable', () => a.status().peers[0]?.reachable === false);
    c.send(`X k ${token} 90\n`);
    await run(clock, 500);
    expect(c.read().split('\n').filter((l) => l === 'X k')).toHaveLength(1);
    await stopAll(clock, nodes);
  });
});

describe('lease extension in a Raft cluster', () => {
  async function three() {
    const clock = new ManualClock();
    const network = new MemoryTransport();
    const disk = new MemoryDisk();
    const peers = ['a=10.0.0.1:5225', 'b=10.0.0.2:5225', 'c=10.0.0.3:5225'];
    let seed = 7;
    const random = () => ((seed = (seed * 16807) % 2147483647) / 2147483647);
    const nodes = await Promise.all(
      ['a', 'b', 'c'].map(async (name, i) =>
        TicketingNode.start(loadConfig({ mode: 'raft', node: name, peers, 'peer-token': TEST_TOKEN, listen: `10.0.0.${i + 1}:5225`, 'data-dir': `/data/${name}` }), {
          logger,
          clock,
          transport: network,
          disk,
          random,
        }),
      ),
    );
    let leader: TicketingNode | undefined;
    await until(clock, 'a leader', () => (leader = nodes.find((n) => n.role === 'leader')) !== undefined);
    return { clock, network, nodes, leader: leader! };
  }

  /** Every command of the leader's log, decoded as text. */
  function commands(n: TicketingNode): string[] {
    const log = n.raftLog()!;
    const out: string[] = [];
    for (let i = log.status.snapshot + 1; i <= log.status.lastIndex; i++) out.push(log.commandAt(i) ?? '?');
    return out;
  }

  it('commits the Extend before the reply; the lease timer about to fire expires nothing; followers hold the new lease', async () => {
    const { clock, network, nodes, leader } = await three();
    const c = client(network, leader.listenAddress);
    c.send('A k 0 1\n');
    await until(clock, 'granted', () => /^A \d+ k\n$/.test(c.read()));
    const token = BigInt(/^A (\d+)/.exec(c.read())![1]!);
    // Just before the 1 s lease ends on the leader (its deadline started at its apply, before the reply).
    await run(clock, 850);
    c.send(`X k ${token} 5\n`);
    await until(clock, 'extended', () => c.read().endsWith('X k\n'), 2_000);
    const log = leader.raftLog()!;
    expect(log.status.commit).toBeGreaterThanOrEqual(commands(leader).indexOf(`L k ${token} 5000`) + log.status.snapshot + 1);
    await run(clock, 2_000); // well past the grant's own lease
    expect(commands(leader)).not.toContain(`X k ${token}`);
    for (const n of nodes) expect(recordOn(n, 'k')).toMatchObject({ token, leaseMs: 5_000 });
    // Then the extended lease runs out: one Expire, for that token, after the Extend.
    await run(clock, 3_500);
    const after = commands(leader);
    expect(after.indexOf(`X k ${token}`)).toBeGreaterThan(after.indexOf(`L k ${token} 5000`));
    expect(c.read()).toBe(`A ${token} k\nX k\n`);
    await stopAll(clock, nodes);
  });

  it('keeps an extended lease through a leader change: the new leader does not end it at the grant\'s lease', async () => {
    const { clock, network, nodes, leader } = await three();
    const c = client(network, leader.listenAddress);
    c.send('A k 0 2\n');
    await until(clock, 'granted', () => /^A \d+ k\n$/.test(c.read()));
    const token = BigInt(/^A (\d+)/.exec(c.read())![1]!);
    c.send(`X k ${token} 30\n`);
    await until(clock, 'extended', () => c.read().endsWith('X k\n'));
    await stopAll(clock, [leader]);
    const rest = nodes.filter((n) => n !== leader);
    let next: TicketingNode | undefined;
    await until(clock, 'a new leader', () => (next = rest.find((n) => n.role === 'leader')) !== undefined);
    await run(clock, 3_000);
    const d = client(network, next!.listenAddress);
    d.send(`A k 0 1\nX k ${token} 1\n`);
    await until(clock, 'answered', () => d.read().split('\n').length >= 3);
    expect(d.read()).toBe('T k\nX k\n');
    await stopAll(clock, rest);
  });
});

describe('AppliedState and extensions', () => {
  const limits = { maxLocks: 100, maxWaitersPerKey: 100, maxWaiters: 100 };
  const entries = (cs: Command[]): Entry[] => cs.map((c, i) => ({ index: i + 1, term: 1, command: encodeCommand(c) }));

  it("keeps the leader's extended deadline when it steps down after the Extend committed", () => {
    const clock = new ManualClock(1_000_000);
    const engine = new LockEngine(clock, limits);
    const state = new AppliedState(engine.records, undefined);
    state.table.apply({ type: 'grant', key: 'k', leaseMs: 1_000 });
    clock.advance(500);
    state.table.apply({ type: 'extend', key: 'k', token: 1n, leaseMs: 10_000 });
    const due = state.table.get('k')!.due;
    expect(due).toBe(1_000_000 + 500 + 10_000);
    const log = entries([
      { type: 'grant', key: 'k', leaseMs: 1_000 },
      { type: 'extend', key: 'k', token: 1n, leaseMs: 10_000 },
    ]);
    state.applyCommitted(log, 2);
    clock.advance(4_000);
    state.rebuild((from, to) => log.filter((e) => e.index >= from && e.index <= to));
    expect(state.table.get('k')).toMatchObject({ leaseMs: 10_000, due });
  });

  it('applies an Extend that comes after the Expire of its grant, or after a new grant, as nothing (never a revival)', () => {
    const clock = new ManualClock(0);
    const state = new AppliedState(new LockEngine(clock, limits).records, undefined);
    const log = entries([
      { type: 'token-floor', atLeast: 5n },
      { type: 'grant', key: 'k', leaseMs: 1_000 },
      { type: 'expire', key: 'k', token: 5n },
      { type: 'extend', key: 'k', token: 5n, leaseMs: 60_000 },
      { type: 'grant', key: 'j', leaseMs: 1_000 },
      { type: 'release', key: 'j', token: 6n },
      { type: 'grant', key: 'j', leaseMs: 1_000 },
      { type: 'extend', key: 'j', token: 6n, leaseMs: 60_000 },
    ]);
    state.applyCommitted(log, 0);
    expect(state.table.get('k')).toBeUndefined();
    expect(state.table.get('j')).toMatchObject({ token: 7n, leaseMs: 1_000 });
  });

  it('counts a follower\'s new lease from its own apply time, later than the leader\'s', () => {
    const clock = new ManualClock(0);
    const state = new AppliedState(new LockEngine(clock, limits).records, undefined);
    state.applyCommitted(entries([{ type: 'grant', key: 'k', leaseMs: 1_000 }]), 0);
    clock.advance(700); // the Extend reached this follower 700 ms after the grant
    state.applyCommitted([{ index: 2, term: 1, command: encodeCommand({ type: 'extend', key: 'k', token: 1n, leaseMs: 3_000 }) }], 0);
    expect(state.table.get('k')).toMatchObject({ due: 3_700, since: 0 });
  });
});
