/**
 * Snapshot transfer with flow control (issue 12, defect 8): a snapshot far
 * larger than a link may buffer goes a window at a time, the InstallSnapshot
 * message last, and the follower's receiver puts it back together.
 */
import { describe, expect, it } from 'vitest';
import { snapshotText, type StoredSnapshot } from '../../src/raft/raft-storage.js';
import { decodeRaftMessage, encodeRaftMessage, SNAPSHOT_CHUNK, type RaftWire } from '../../src/raft/raft-wire.js';
import { SnapshotReceiver, SnapshotSender } from '../../src/raft/snapshot-transfer.js';
import type { Message } from '../../src/raft/types.js';

function bigSnapshot(locks: number): StoredSnapshot {
  const meta = { index: 500, term: 3 };
  const table = { nextToken: '1000000', locks: Array.from({ length: locks }, (_, i): [string, string, number] => [`orders/${i}`, String(1000 + i), 30_000]) };
  return { meta, table, text: snapshotText(meta, table) };
}

/** A peer link whose socket sends only when the test says so. */
class FakeLink {
  queued: string[] = [];
  bytes = 0;
  up = true;
  maxBacklog = 0;
  backlog(): number | undefined {
    return this.up ? this.bytes : undefined;
  }
  send(_peer: string, line: string): void {
    this.queued.push(line);
    this.bytes += line.length;
    this.maxBacklog = Math.max(this.maxBacklog, this.bytes);
  }
  /** The socket sent everything: returns the lines, as the peer reads them. */
  drain(): string[] {
    const out = this.queued;
    this.queued = [];
    this.bytes = 0;
    return out;
  }
}

const install = (term = 3): Extract<Message, { type: 'snapshot' }> => ({ type: 'snapshot', from: 'a', to: 'b', term, snapshot: { index: 500, term: 3 } });

describe('SnapshotSender', () => {
  it('sends a large snapshot a window at a time, InstallSnapshot last, and the receiver rebuilds it', () => {
    const snap = bigSnapshot(100_000); // ~2.6 MB: about ten chunks
    expect(snap.text.length).toBeGreaterThan(8 * SNAPSHOT_CHUNK);
    const link = new FakeLink();
    const window = 2 * SNAPSHOT_CHUNK;
    const sender = new SnapshotSender(link, encodeRaftMessage, window);
    sender.start(install(), snap);
    const received: RaftWire[] = [];
    for (let round = 0; round < 100 && (link.queued.length > 0 || sender.sending > 0); round++) {
      for (const line of link.drain()) received.push(decodeRaftMessage(line));
      sender.pump('b');
    }
    // Never more than one chunk beyond the window queued (the link's own limit is far above).
    expect(link.maxBacklog).toBeLessThan(window + SNAPSHOT_CHUNK + 1024);
    expect(received.at(-1)).toMatchObject({ type: 'snapshot', snapshot: { index: 500 } });
    const receiver = new SnapshotReceiver((err) => {
      throw err;
    });
    let whole: StoredSnapshot | undefined;
    for (const m of received) if (m.type === 'snapshot-chunk') whole = receiver.accept(m) ?? whole;
    expect(whole?.table.locks.length).toBe(100_000);
    expect(whole?.text).toBe(snap.text);
  });

  it('does not start over when the core asks again while a transfer is going, nor right after it ended', () => {
    const link = new FakeLink();
    const sender = new SnapshotSender(link, encodeRaftMessage, SNAPSHOT_CHUNK);
    const snap = bigSnapshot(20_000);
    sender.start(install(), snap);
    const first = link.queued.length;
    sender.start(install(), snap); // a heartbeat passed without an answer
    expect(link.queued.length).toBe(first);
    for (let i = 0; i < 50 && sender.sending > 0; i++) {
      link.drain();
      sender.pump('b');
    }
    link.drain();
    sender.start(install(), snap); // the follower is still installing it
    expect(link.queued).toEqual([]);
    // A new term's leader sends it again.
    sender.start(install(4), snap);
    expect(link.queued.length).toBeGreaterThan(0);
  });

  it('ends a transfer when the link drops, and starts over from the first chunk when asked again', () => {
    const link = new FakeLink();
    const sender = new SnapshotSender(link, encodeRaftMessage, SNAPSHOT_CHUNK);
    const snap = bigSnapshot(20_000);
    sender.start(install(), snap);
    link.drain();
    link.up = false;
    sender.pump('b');
    expect(sender.sending).toBe(0);
    link.up = true;
    sender.start(install(), snap);
    expect(decodeRaftMessage(link.queued[0]!)).toMatchObject({ type: 'snapshot-chunk', offset: 0 });
  });
});
