/**
 * A Raft node on the fake seams (in-memory network and disk, a manual clock)
 * with a fake peer on its peer port: what the node does with its own
 * failures, which no peer may hide.
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { TicketingNode } from '../../src/node/ticketing-node.js';
import { ManualClock } from '../../src/seams/clock.js';
import { clusterOf, FakePeer, turns } from '../fakes/fake-peer.js';
import { MemoryDisk } from '../fakes/memory-disk.js';
import { MemoryTransport } from '../fakes/memory-transport.js';

const logger = pino({ level: 'silent' });
const TOKEN = 'peer-secret-3f9c2a';
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
    const p = await FakePeer.connect(transport, A_PEER, 'b', 'a', TOKEN, clusterOf('raft', PEERS));
    const send = (m: object) => p.send(`${JSON.stringify({ from: 'b', to: 'a', ...m })}\n`);
    // b leads term 1 and commits three entries on a.
    send({ type: 'append', term: 1, prevIndex: 0, prevTerm: 0, entries: [[1, 1, ''], [2, 1, ''], [3, 1, '']], commit: 3 });
    await turns(20);
    await run(clock, 50);
    expect(node.status().raft!.commit).toBe(3);
    // A leader of a later term that disagrees at committed index 2: following it would erase a
    // committed entry, which the core refuses with a safety assertion (a bug somewhere, never normal).
    send({ type: 'append', term: 2, prevIndex: 1, prevTerm: 1, entries: [[2, 2, '']], commit: 2 });
    await turns(20);
    await run(clock, 6_000);
    expect(own.map((e) => e.name)).toContain('SafetyViolation');
    expect(exited()).toBe(1);
  });
});
