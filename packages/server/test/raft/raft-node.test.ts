/**
 * A Raft node on the fake seams (in-memory network and disk, a manual clock)
 * with a fake peer on its peer port: what the node does with its own
 * failures, which no peer may hide.
 */
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { SafetyViolation } from '../../src/errors.js';
import { RaftCore } from '../../src/raft/raft-core.js';
import { loadConfig } from '../../src/config/load.js';
import { TicketingNode } from '../../src/node/ticketing-node.js';
import { ManualClock } from '../../src/seams/clock.js';
import { clusterOf, FakePeer, TEST_TOKEN, turns } from '../fakes/fake-peer.js';
import { MemoryDisk } from '../fakes/memory-disk.js';
import { MemoryTransport } from '../fakes/memory-transport.js';

const logger = pino({ level: 'silent' });
const TOKEN = TEST_TOKEN;
const PEERS = ['a=10.0.0.1:5225', 'b=10.0.0.2:5225', 'c=10.0.0.3:5225'];
const A_PEER = '10.0.0.1:5226';

async function run(clock: ManualClock, ms: number): Promise<void> {
  for (let t = 0; t < ms; t += 10) {
    clock.advance(10);
    await turns();
  }
}

async function startA() {
  const clock = new ManualClock();
  const transport = new MemoryTransport();
  const config = loadConfig({ mode: 'raft', node: 'a', peers: PEERS, 'peer-token': TOKEN, listen: '10.0.0.1:5225', 'data-dir': '/data/a' });
  let exited: number | undefined;
  const own: Error[] = [];
  const node = await TicketingNode.start(config, {
    logger,
    clock,
    transport,
    disk: new MemoryDisk(),
    random: () => 0.5,
    onExit: (code) => (exited = code),
    onInternalError: (err) => void own.push(err),
  });
  return { node, clock, transport, exited: () => exited, own };
}

describe('a Raft node and its own failures', () => {
  it('a safety assertion inside a peer message handler stops the node and is reported, not swallowed with the link (D-9)', async () => {
    const { node, clock, transport, exited, own } = await startA();
    const p = await FakePeer.connect(transport, A_PEER, 'b', TOKEN, clusterOf('raft', PEERS));
    // Planted: the consensus core finds one of its invariants broken while it handles a message.
    const step = vi.spyOn(RaftCore.prototype, 'step').mockImplementation(() => {
      throw new SafetyViolation('planted: an invariant of the core is broken');
    });
    p.send(`${JSON.stringify({ type: 'heartbeat', from: 'b', to: 'a', term: 1, commit: 0, commitTerm: 0, read: 0, reach: [] })}\n`);
    await turns(20);
    step.mockRestore();
    await run(clock, 6_000);
    expect(own.map((e) => e.message)).toEqual(['planted: an invariant of the core is broken']);
    expect(exited()).toBe(1);
    expect(node.events.internalErrors).toBe(1);
  });

  it('a leader that contradicts a committed entry is refused with its link; the node goes on', async () => {
    const { node, clock, transport, exited, own } = await startA();
    const p = await FakePeer.connect(transport, A_PEER, 'b', TOKEN, clusterOf('raft', PEERS));
    const send = (m: object) => p.send(`${JSON.stringify({ from: 'b', to: 'a', ...m })}\n`);
    send({ type: 'append', term: 1, prevIndex: 0, prevTerm: 0, entries: [[1, 1, ''], [2, 1, ''], [3, 1, '']], commit: 3 });
    await turns(20);
    await run(clock, 50);
    expect(node.status().raft!.commit).toBe(3);
    send({ type: 'append', term: 2, prevIndex: 1, prevTerm: 1, entries: [[2, 2, '']], commit: 2 });
    await turns(20);
    await run(clock, 100);
    expect(p.closed).toBe(true);
    expect(node.events.badPeerMessages).toBe(1);
    expect(own).toEqual([]);
    expect(exited()).toBeUndefined();
    expect(node.status().raft!.commit).toBe(3);
  });
});
