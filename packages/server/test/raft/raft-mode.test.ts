/**
 * The Raft runtime (raft-mode.ts) on a fake host, an in-memory disk and
 * network: messages are handed to it as its peer links would, so the order
 * of what arrives while its Ready loop waits for the disk is the test's.
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { LockEngine } from '../../src/engine/lock-engine.js';
import type { ModeHost } from '../../src/node/mode.js';
import { PEER_PROTOCOLS } from '../../src/peers/handshake.js';
import { RaftMode } from '../../src/raft/raft-mode.js';
import { RaftStorage, snapshotText, type StoredSnapshot } from '../../src/raft/raft-storage.js';
import { encodeRaftMessage, decodeRaftMessage, type RaftWire } from '../../src/raft/raft-wire.js';
import { snapshotChunks } from '../../src/raft/snapshot-transfer.js';
import { ManualClock } from '../../src/seams/clock.js';
import { NO_PROBES } from '../../src/seams/environment.js';
import { TEST_TOKEN } from '../fakes/fake-peer.js';
import { MemoryDisk } from '../fakes/memory-disk.js';
import { MemoryTransport } from '../fakes/memory-transport.js';

const PEERS = ['a=10.0.0.1:5225', 'b=10.0.0.2:5225', 'c=10.0.0.3:5225'];

async function turns(n = 10): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}

/** A Raft mode for node `b` whose host records what the mode asks of it. */
async function follower(flags: Record<string, unknown> = {}) {
  const clock = new ManualClock();
  const config = loadConfig({ mode: 'raft', node: 'b', peers: PEERS, listen: '10.0.0.2:5225', 'data-dir': '/data/b', 'peer-token': TEST_TOKEN, ...flags });
  const engine = new LockEngine(clock, { maxLocks: 1000, maxWaitersPerKey: 100, maxWaiters: 1000 });
  const fatal: Error[] = [];
  const disk = new MemoryDisk();
  const host: ModeHost = {
    config,
    listenAddress: '10.0.0.2:5225',
    logger: pino({ level: 'silent' }),
    clock,
    env: { clock, transport: new MemoryTransport(), disk, random: () => 0.5, probes: NO_PROBES },
    engine,
    events: { clockFloorWarnings: 0, diskErrors: 0, badPeerMessages: 0, peerAuthFailures: 0, peerValuesOutOfRange: {}, peerConnectionsShed: 0, clientAuthFailures: 0, internalErrors: 0 },
    tokenFloor: 1n,
    recordedTokenMark: 0n,
    peerProtocols: PEER_PROTOCOLS,
    serve: () => {},
    stand: () => {},
    pauseClients: () => {},
    resumeClients: () => {},
    reserveTokens: () => true,
    setReplyGate: () => {},
    commitAdvanced: () => {},
    fatal: (err) => void fatal.push(err),
    internalError: (err) => void fatal.push(err),
  };
  const mode = new RaftMode(host);
  await mode.start();
  /** Hands `m` to the mode as its link from `a` would (encoded and decoded, as on the wire). */
  const deliver = (m: RaftWire) => mode.message('a', decodeRaftMessage(encodeRaftMessage(m).trimEnd()));
  /** The WAL as text (its records' payloads are readable). */
  const wal = () => [...disk.files].filter(([p]) => /\/raft\/wal-\d+\.log$/.test(p)).map(([, b]) => b.toString('latin1')).join('');
  return { mode, fatal, deliver, clock, wal, disk };
}

function snapshot(index: number, term: number, locks: number): StoredSnapshot {
  const table = { nextToken: String(100 + locks), locks: Array.from({ length: locks }, (_, i) => [`k${i}`, String(100 + i), 30_000] as const) };
  const meta = { index, term };
  return { meta, table, text: snapshotText(meta, table) };
}

describe('RaftMode', () => {
  it('installs the snapshot it accepted when a newer one arrives whole while its loop waits for the disk (D-8)', async () => {
    const { fatal, deliver, mode } = await follower();
    const base = { from: 'a', to: 'b', term: 2 } as const;
    // An append starts a Ready whose write is in flight when the snapshots come.
    deliver({ type: 'append', ...base, prevIndex: 0, prevTerm: 0, entries: [{ index: 1, term: 2, command: '' }], commit: 0 });
    const first = snapshot(40, 2, 3);
    const install = { type: 'snapshot', ...base, snapshot: first.meta } as const;
    for (const c of snapshotChunks(install, first)) deliver(c);
    deliver(install);
    // The next snapshot's data is whole, its InstallSnapshot message not here yet.
    const second = snapshot(80, 2, 5);
    for (const c of snapshotChunks({ ...install, snapshot: second.meta }, second)) deliver(c);
    await turns();
    expect(fatal).toEqual([]);
    expect(mode.raftStatus().snapshot).toBe(40);
    deliver({ ...install, snapshot: second.meta });
    await turns();
    expect(fatal).toEqual([]);
    expect(mode.raftStatus().snapshot).toBe(80);
    expect(mode.heldCount()).toBe(5);
  });

  it('writes the entries it keeps after a snapshot once, in the snapshot\'s new segment (D-1)', async () => {
    const { fatal, deliver, mode, wal } = await follower();
    const base = { from: 'a', to: 'b', term: 2 } as const;
    const entries = Array.from({ length: 6 }, (_, i) => ({ index: i + 1, term: 2, command: `G k${i + 1} 1000` }));
    deliver({ type: 'append', ...base, prevIndex: 0, prevTerm: 0, entries, commit: 0 });
    await turns();
    const snap = snapshot(4, 2, 4);
    const install = { type: 'snapshot', ...base, snapshot: snap.meta } as const;
    for (const c of snapshotChunks(install, snap)) deliver(c);
    deliver(install);
    await turns();
    expect(fatal).toEqual([]);
    expect(mode.raftStatus().snapshot).toBe(4);
    // Entries 5 and 6 were on disk already: the new segment carries them, and nothing writes them again.
    expect(wal().split('E 5 2 ').length - 1).toBe(1);
    expect(wal().split('E 6 2 ').length - 1).toBe(1);
  });

  it('a joining node records that it is still joining in the segment a snapshot starts (D-4)', async () => {
    const { fatal, deliver, mode, disk } = await follower({ 'raft-join': true });
    const base = { from: 'a', to: 'b', term: 3 } as const;
    // First contact: the leader has committed through 50, which this replaced node must reach before it votes.
    deliver({ type: 'heartbeat', ...base, commit: 50, commitTerm: 3, read: 0, reach: [] });
    const snap = snapshot(40, 3, 2);
    const install = { type: 'snapshot', ...base, snapshot: snap.meta } as const;
    for (const c of snapshotChunks(install, snap)) deliver(c);
    deliver(install);
    await turns();
    expect(fatal).toEqual([]);
    expect(mode.raftStatus().snapshot).toBe(40);
    // A crash now, and a restart without --raft-join, must still find it joining (commit 40 < 50).
    expect(RaftStorage.inspect(disk, '/data/b').state.hardState.membership).toBe('joining');
  });
});
