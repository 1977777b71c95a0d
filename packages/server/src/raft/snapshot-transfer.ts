/**
 * A snapshot travels from leader to follower as chunks (each one line on the
 * peer link, well under its line limit) before the InstallSnapshot message
 * that names it, a window at a time (SnapshotSender); the follower steps that
 * message only once the data it names has arrived whole (otherwise the leader
 * sends it again).
 */
import { parseSnapshotText, type StoredSnapshot } from './raft-storage.js';
import { SNAPSHOT_CHUNK, type SnapshotChunk } from './raft-wire.js';
import type { Message } from './types.js';
import { PeerProtocolError } from '../errors.js';

/** Characters a snapshot takes per lock at most (a 250-byte key, token, lease) and for its header. */
const CHARS_PER_LOCK = 320;
const HEADER_CHARS = 4096;

/** The largest snapshot a node with `maxLocks` locks can produce. */
export function maxSnapshotChars(maxLocks: number): number {
  return HEADER_CHARS + CHARS_PER_LOCK * maxLocks;
}

/** The chunks of `snapshot` for the InstallSnapshot message `m`. */
export function* snapshotChunks(m: Extract<Message, { type: 'snapshot' }>, snapshot: StoredSnapshot, chunk = SNAPSHOT_CHUNK): Generator<SnapshotChunk> {
  const text = snapshot.text;
  let part = 0;
  for (let offset = 0; offset < text.length; offset += chunk) {
    yield {
      type: 'snapshot-chunk',
      from: m.from,
      to: m.to,
      term: m.term,
      index: snapshot.meta.index,
      offset: part++,
      last: offset + chunk >= text.length,
      data: text.slice(offset, offset + chunk),
    };
  }
}

/**
 * Most snapshot bytes queued on one peer link at a time. A snapshot at the
 * default max-locks is larger than the link's own limit (peer-mesh drops a
 * link with 64 MiB unsent), so it goes a window at a time, the next chunks as
 * the link drains; appends and heartbeats keep flowing beside it.
 */
export const SNAPSHOT_WINDOW_BYTES = 4 * 1024 * 1024;

/** The peer links as a snapshot transfer sees them. */
export interface SnapshotLink {
  /** Bytes queued toward `peer` and not yet sent; undefined when the link is down. */
  backlog(peer: string): number | undefined;
  send(peer: string, line: string): void;
}

/**
 * After its last chunk, a transfer is sent again only when the core has asked
 * this many more times (one ask per heartbeat without an answer): installing a
 * large snapshot takes the follower a while, and the link is still up, so
 * nothing was lost (a dropped link ends the transfer at once).
 */
const RESEND_AFTER_ASKS = 20;

interface Transfer {
  readonly index: number;
  readonly term: number;
  readonly chunks: Generator<SnapshotChunk>;
  /** The InstallSnapshot message, sent after the last chunk. */
  readonly install: Extract<Message, { type: 'snapshot' }>;
  done: boolean;
  asks: number;
}

/** The leader's snapshot transfers, at most one per follower, each sent with flow control. */
export class SnapshotSender {
  private readonly transfers = new Map<string, Transfer>();

  constructor(
    private readonly link: SnapshotLink,
    private readonly encode: (m: Extract<Message, { type: 'snapshot' }> | SnapshotChunk) => string,
    private readonly window = SNAPSHOT_WINDOW_BYTES,
    /** Characters per chunk for the next transfer (the simulator makes them tiny, so transfers take many). */
    private readonly chunkSize: () => number = () => SNAPSHOT_CHUNK,
  ) {}

  /** Starts sending `snapshot` for the InstallSnapshot message `m`, unless that very transfer is under way. */
  start(m: Extract<Message, { type: 'snapshot' }>, snapshot: StoredSnapshot): void {
    const current = this.transfers.get(m.to);
    // The core asks again after a heartbeat without an answer; a transfer still going is the answer.
    if (current !== undefined && current.index === snapshot.meta.index && current.term === m.term) {
      if (!current.done || ++current.asks < RESEND_AFTER_ASKS) return;
    }
    this.transfers.set(m.to, { index: snapshot.meta.index, term: m.term, chunks: snapshotChunks(m, snapshot, this.chunkSize()), install: m, done: false, asks: 0 });
    this.pump(m.to);
  }

  /** Sends what fits in the window toward `peer` (call when its link drains, and now and then). */
  pump(peer: string): void {
    const t = this.transfers.get(peer);
    if (t === undefined) return;
    for (;;) {
      const backlog = this.link.backlog(peer);
      if (backlog === undefined) {
        // The link dropped: the follower's half-received copy is gone with it; the core asks again.
        this.transfers.delete(peer);
        return;
      }
      if (backlog >= this.window || t.done) return;
      const next = t.chunks.next();
      if (next.done === true) {
        this.link.send(peer, this.encode(t.install));
        t.done = true;
        return;
      }
      this.link.send(peer, this.encode(next.value));
    }
  }

  pumpAll(): void {
    for (const peer of [...this.transfers.keys()]) this.pump(peer);
  }

  /** This node stopped leading: its transfers are over. */
  clear(): void {
    this.transfers.clear();
  }

  /** Transfers with chunks still to send. */
  get sending(): number {
    return [...this.transfers.values()].filter((t) => !t.done).length;
  }
}

/** Puts a snapshot's chunks back together; a missing chunk drops it (the leader starts over). */
export class SnapshotReceiver {
  private incoming: { index: number; parts: string[]; bytes: number } | undefined;

  constructor(
    private readonly onDamaged: (err: Error) => void,
    /** Most characters a snapshot may have (one of max-locks locks at most); beyond it the link is closed. */
    private readonly maxChars: number = Number.MAX_SAFE_INTEGER,
  ) {}

  /** Takes one chunk; returns the snapshot when this chunk completed it. */
  accept(c: SnapshotChunk): StoredSnapshot | undefined {
    if (c.offset === 0) this.incoming = { index: c.index, parts: [], bytes: 0 };
    const inc = this.incoming;
    if (inc === undefined || inc.index !== c.index || inc.parts.length !== c.offset) {
      this.incoming = undefined; // a chunk went missing: wait for the leader to start over
      return undefined;
    }
    inc.bytes += c.data.length;
    if (inc.bytes > this.maxChars) {
      this.incoming = undefined;
      throw new PeerProtocolError(`snapshot ${c.index} is larger than any table this node may hold (${this.maxChars} characters)`);
    }
    inc.parts.push(c.data);
    if (!c.last) return undefined;
    this.incoming = undefined;
    try {
      return parseSnapshotText(inc.parts.join(''));
    } catch (err) {
      this.onDamaged(err as Error);
      return undefined;
    }
  }
}
