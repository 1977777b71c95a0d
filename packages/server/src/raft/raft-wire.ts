/**
 * Raft messages on peer links: one JSON object per line (after the mesh's
 * HELLO). Entries travel as [index, term, command]. A snapshot travels as
 * chunks before the InstallSnapshot message that names it.
 */
import { PeerProtocolError } from '../errors.js';
import type { Entry, Message } from './types.js';

export interface SnapshotChunk {
  readonly type: 'snapshot-chunk';
  readonly from: string;
  readonly to: string;
  readonly term: number;
  readonly index: number;
  readonly offset: number;
  readonly last: boolean;
  readonly data: string;
}

export type RaftWire = Message | SnapshotChunk;

/** Bytes of snapshot text per chunk (a line stays well under the link's line limit). */
export const SNAPSHOT_CHUNK = 256 * 1024;
/** The longest line a Raft link accepts. */
export const MAX_RAFT_LINE = 2 * 1024 * 1024;

export function encodeRaftMessage(m: RaftWire): string {
  if (m.type === 'append') {
    return `${JSON.stringify({ ...m, entries: m.entries.map((e) => [e.index, e.term, e.command]) })}\n`;
  }
  return `${JSON.stringify(m)}\n`;
}

const TYPES = new Set(['vote', 'vote-resp', 'append', 'append-resp', 'heartbeat', 'heartbeat-resp', 'snapshot', 'snapshot-chunk']);

function num(v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw new PeerProtocolError(`bad number ${String(v)}`);
  return v;
}

export function decodeRaftMessage(line: string): RaftWire {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(line) as Record<string, unknown>;
  } catch {
    throw new PeerProtocolError('not JSON');
  }
  if (typeof o !== 'object' || o === null || typeof o.type !== 'string' || !TYPES.has(o.type)) throw new PeerProtocolError('unknown raft message');
  if (typeof o.from !== 'string' || typeof o.to !== 'string') throw new PeerProtocolError('raft message without from/to');
  num(o.term);
  if (o.type === 'append') {
    if (!Array.isArray(o.entries)) throw new PeerProtocolError('append without entries');
    num(o.prevIndex);
    num(o.prevTerm);
    num(o.commit);
    const entries: Entry[] = (o.entries as unknown[]).map((e) => {
      if (!Array.isArray(e) || typeof e[2] !== 'string') throw new PeerProtocolError('bad entry');
      return { index: num(e[0]), term: num(e[1]), command: e[2] };
    });
    return { ...(o as unknown as Message & { type: 'append' }), entries };
  }
  return o as unknown as RaftWire;
}
