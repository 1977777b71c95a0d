/**
 * A snapshot travels from leader to follower as chunks (each one line on the
 * peer link, well under its line limit) before the InstallSnapshot message
 * that names it; the follower steps that message only once the data it names
 * has arrived whole (otherwise the leader sends it again).
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
export function* snapshotChunks(m: Extract<Message, { type: 'snapshot' }>, snapshot: StoredSnapshot): Generator<SnapshotChunk> {
  const text = snapshot.text;
  let part = 0;
  for (let offset = 0; offset < text.length; offset += SNAPSHOT_CHUNK) {
    yield {
      type: 'snapshot-chunk',
      from: m.from,
      to: m.to,
      term: m.term,
      index: snapshot.meta.index,
      offset: part++,
      last: offset + SNAPSHOT_CHUNK >= text.length,
      data: text.slice(offset, offset + SNAPSHOT_CHUNK),
    };
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
