/**
 * A snapshot travels from leader to follower as chunks (each one line on the
 * peer link, well under its line limit) before the InstallSnapshot message
 * that names it; the follower steps that message only once the data it names
 * has arrived whole (otherwise the leader sends it again).
 */
import { parseSnapshotText, type StoredSnapshot } from './raft-storage.js';
import { SNAPSHOT_CHUNK, type SnapshotChunk } from './raft-wire.js';
import type { Message } from './types.js';

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
  private incoming: { index: number; parts: string[] } | undefined;

  constructor(private readonly onDamaged: (err: Error) => void) {}

  /** Takes one chunk; returns the snapshot when this chunk completed it. */
  accept(c: SnapshotChunk): StoredSnapshot | undefined {
    if (c.offset === 0) this.incoming = { index: c.index, parts: [] };
    const inc = this.incoming;
    if (inc === undefined || inc.index !== c.index || inc.parts.length !== c.offset) {
      this.incoming = undefined; // a chunk went missing: wait for the leader to start over
      return undefined;
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
