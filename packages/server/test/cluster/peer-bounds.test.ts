/**
 * Bounds on what an authenticated priority peer sends (issue 25's F4, the
 * priority side): a heartbeat, snapshot or hand-off carrying a token no
 * clock could explain (2^64-2 is a valid u64) closes that link, is counted,
 * and is never inherited nor written to the data directory's token mark.
 * A real node on fake seams; the fake peer is the active it would follow.
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { TicketingNode } from '../../src/node/ticketing-node.js';
import { ManualClock } from '../../src/seams/clock.js';
import { clusterOf, FakePeer, TEST_TOKEN, turns } from '../fakes/fake-peer.js';
import { MemoryDisk } from '../fakes/memory-disk.js';
import { MemoryTransport } from '../fakes/memory-transport.js';

const logger = pino({ level: 'silent' });
const TOKEN = TEST_TOKEN;
const PEERS = ['a=10.0.0.1:5225', 'b=10.0.0.2:5225'];
const HUGE = (1n << 64n) - 2n;

async function run(clock: ManualClock, ms: number): Promise<void> {
  for (let t = 0; t < ms; t += 10) {
    clock.advance(10);
    await turns();
  }
}

/** A v2 heartbeat of an active at epoch 5 announcing `next`, stamped with wall time `wall`. */
function heartbeat(next: bigint, wall: number): string {
  return `HB active 5 1 0 1 ${next} - - ${wall} 1000 - 0\n`;
}

describe('priority peer messages are bounded', () => {
  for (const [what, line] of [
    ['a heartbeat', (wall: number) => heartbeat(HUGE, wall)],
    ['a snapshot', (wall: number) => `${heartbeat(6n, wall)}SNAP 5 0 ${HUGE} 0\n`],
    ['a replicated grant', (wall: number) => `${heartbeat(6n, wall)}SNAP 5 0 6 0\nSNAPEND\nG k 1000 ${HUGE}\n`],
    ['a hand-off', (_wall: number) => `TAKEN 9 ${HUGE}\n`],
  ] as const) {
    it(`${what} with token 2^64-2 closes the link, is counted, and is never stored`, async () => {
      const clock = new ManualClock();
      const disk = new MemoryDisk();
      const transport = new MemoryTransport();
      const config = loadConfig({ node: 'b', peers: PEERS, 'peer-token': TOKEN, listen: '10.0.0.2:5225', 'data-dir': '/data/b' });
      const node = await TicketingNode.start(config, { logger, clock, transport, disk, random: () => 0.5 });
      const p = await FakePeer.connect(transport, '10.0.0.2:5226', 'a', TOKEN, clusterOf('priority', PEERS));
      p.send(line(clock.wallNow()));
      await turns(20);
      await run(clock, 1_000);
      expect(p.closed).toBe(true);
      expect(node.events.badPeerMessages).toBeGreaterThanOrEqual(1);
      expect(Object.values(node.events.peerValuesOutOfRange).reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(1);
      for (const file of ['token-high-water', 'token-high-water.ahead']) {
        let text: string;
        try {
          text = disk.readFile(`/data/b/${file}`).toString();
        } catch {
          continue;
        }
        expect(BigInt(text.split(' ')[0]!)).toBeLessThan(1n << 62n);
      }
      await node.shutdown();
    });
  }
});
