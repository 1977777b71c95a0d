/**
 * Raft messages on peer links: one JSON object per line (after the mesh's
 * HELLO). Entries travel as [index, term, command]. A snapshot travels as
 * chunks before the InstallSnapshot message that names it.
 */
import { PeerProtocolError } from '../errors.js';
import type { Entry, Message } from './types.js';
import { decodeConfiguration, isConfigurationCommand, MAX_MEMBERS, MEMBER_NAME } from './configuration.js';
import { decodeCommand } from '../state-machine/command-codec.js';
import { checkCommand, checkCommandFields } from '../state-machine/command-check.js';

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

/**
 * A heartbeat as it travels: with `reach`, the members the leader heard from
 * within the failover timeout, so every node reports the leader's view of
 * who is reachable (followers never talk to each other).
 */
export type HeartbeatWire = Extract<Message, { type: 'heartbeat' }> & { readonly reach: readonly string[] };

export type RaftWire = Exclude<Message, { type: 'heartbeat' }> | HeartbeatWire | SnapshotChunk;

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

/**
 * The largest term a message may carry. Terms grow by one per election, so
 * no real cluster comes near it; a term up to 2^53-1 would be adopted,
 * persisted, and leave no room for any later election.
 */
export const MAX_TERM = 2 ** 40;
/** Most entries in one append (the leader sends far fewer per message). */
const MAX_ENTRIES = 100_000;

type Fields = Record<string, unknown>;

function num(o: Fields, key: string, max = Number.MAX_SAFE_INTEGER): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0 || v > max) throw new PeerProtocolError(`bad ${key}`);
  return v;
}

function bool(o: Fields, key: string): boolean {
  const v = o[key];
  if (typeof v !== 'boolean') throw new PeerProtocolError(`bad ${key}`);
  return v;
}

/** Exactly these keys: a message with anything else (or anything missing) is not one we sent. */
function keys(o: Fields, expected: readonly string[]): void {
  const got = Object.keys(o);
  if (got.length !== expected.length || !expected.every((k) => Object.hasOwn(o, k))) {
    throw new PeerProtocolError(`raft ${String(o.type)} message must have exactly ${expected.join(', ')}`);
  }
}

const BASE = ['type', 'from', 'to', 'term'];
const SHAPES: Record<string, readonly string[]> = {
  vote: [...BASE, 'lastIndex', 'lastTerm', 'pre', 'transfer', 'founders'],
  'vote-resp': [...BASE, 'granted', 'pre', 'empty'],
  append: [...BASE, 'prevIndex', 'prevTerm', 'entries', 'commit'],
  'append-resp': [...BASE, 'success', 'match', 'hint', 'rejected'],
  heartbeat: [...BASE, 'commit', 'commitTerm', 'read', 'reach'],
  'heartbeat-resp': [...BASE, 'lastIndex', 'read'],
  snapshot: [...BASE, 'snapshot'],
  'snapshot-chunk': [...BASE, 'index', 'offset', 'last', 'data'],
  'timeout-now': BASE,
};
/** A member's name as a node's config allows it. */

/**
 * Decodes and checks one Raft line against the exact shape of its type:
 * every field present with its type and range, terms bounded, entries
 * contiguous after prevIndex with terms that never decrease nor pass the
 * message's term, and every entry's command one the lock table accepts
 * (checked here, before it can reach the WAL). Throws PeerProtocolError.
 */
export function decodeRaftMessage(line: string): RaftWire {
  let o: Fields;
  try {
    o = JSON.parse(line) as Fields;
  } catch {
    throw new PeerProtocolError('not JSON');
  }
  if (typeof o !== 'object' || o === null || Array.isArray(o) || typeof o.type !== 'string' || !Object.hasOwn(SHAPES, o.type)) {
    throw new PeerProtocolError('unknown raft message');
  }
  keys(o, SHAPES[o.type]!);
  if (typeof o.from !== 'string' || typeof o.to !== 'string' || !MEMBER_NAME.test(o.from) || !MEMBER_NAME.test(o.to)) throw new PeerProtocolError('raft message without from/to');
  const base = { from: o.from, to: o.to, term: num(o, 'term', MAX_TERM) };
  switch (o.type) {
    case 'vote':
      if (typeof o.founders !== 'string' || o.founders.length > 64 * MAX_MEMBERS || (o.founders !== '' && !o.founders.split(',').every((n) => MEMBER_NAME.test(n)))) throw new PeerProtocolError('bad founders');
      return { type: 'vote', ...base, lastIndex: num(o, 'lastIndex'), lastTerm: num(o, 'lastTerm', base.term), pre: bool(o, 'pre'), transfer: bool(o, 'transfer'), founders: o.founders };
    case 'vote-resp':
      return { type: 'vote-resp', ...base, granted: bool(o, 'granted'), pre: bool(o, 'pre'), empty: bool(o, 'empty') };
    case 'append':
      return decodeAppend(o, base);
    case 'append-resp':
      return { type: 'append-resp', ...base, success: bool(o, 'success'), match: num(o, 'match'), hint: num(o, 'hint'), rejected: num(o, 'rejected') };
    case 'heartbeat': {
      const reach = o.reach;
      if (!Array.isArray(reach) || reach.length > MAX_MEMBERS || !reach.every((n) => typeof n === 'string' && MEMBER_NAME.test(n))) throw new PeerProtocolError('bad reach');
      return { type: 'heartbeat', ...base, commit: num(o, 'commit'), commitTerm: num(o, 'commitTerm', base.term), read: num(o, 'read'), reach: reach as string[] };
    }
    case 'timeout-now':
      return { type: 'timeout-now', ...base };
    case 'heartbeat-resp':
      return { type: 'heartbeat-resp', ...base, lastIndex: num(o, 'lastIndex'), read: num(o, 'read') };
    case 'snapshot': {
      const meta = o.snapshot as Fields;
      if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) throw new PeerProtocolError('bad snapshot');
      const withMembers = Object.hasOwn(meta, 'members');
      keys(meta, withMembers ? ['index', 'term', 'members'] : ['index', 'term']);
      const snapshot = { index: num(meta, 'index'), term: num(meta, 'term', base.term) };
      if (!withMembers) return { type: 'snapshot', ...base, snapshot };
      return { type: 'snapshot', ...base, snapshot: { ...snapshot, members: checkedConfiguration(meta.members) } };
    }
    default: {
      // snapshot-chunk
      if (typeof o.data !== 'string' || o.data.length > SNAPSHOT_CHUNK) throw new PeerProtocolError('bad snapshot chunk data');
      return { type: 'snapshot-chunk', ...base, index: num(o, 'index'), offset: num(o, 'offset'), last: bool(o, 'last'), data: o.data };
    }
  }
}

function decodeAppend(o: Fields, base: { from: string; to: string; term: number }): RaftWire {
  const prevIndex = num(o, 'prevIndex');
  const prevTerm = num(o, 'prevTerm', base.term);
  const commit = num(o, 'commit');
  if (!Array.isArray(o.entries) || o.entries.length > MAX_ENTRIES) throw new PeerProtocolError('append without entries');
  let lastTerm = prevTerm;
  const entries: Entry[] = (o.entries as unknown[]).map((e, i) => {
    if (!Array.isArray(e) || e.length !== 3 || typeof e[2] !== 'string') throw new PeerProtocolError('bad entry');
    const f = { index: e[0] as unknown, term: e[1] as unknown };
    const index = num(f, 'index');
    const term = num(f, 'term', base.term);
    if (index !== prevIndex + 1 + i) throw new PeerProtocolError('append entries are not contiguous after prevIndex');
    if (term < lastTerm) throw new PeerProtocolError('append entry terms go back');
    lastTerm = term;
    try {
      if (isConfigurationCommand(e[2])) checkedConfiguration(e[2]);
      else {
        checkCommandFields(e[2], false);
        checkCommand(decodeCommand(e[2]));
      }
    } catch (err) {
      throw new PeerProtocolError(`append entry ${index} holds no valid command: ${(err as Error).message}`, { cause: err });
    }
    return { index, term, command: e[2] };
  });
  return { type: 'append', ...base, prevIndex, prevTerm, entries, commit };
}

/** A membership entry's text, checked (names, addresses, at most MAX_MEMBERS, a voter). */
function checkedConfiguration(text: unknown): string {
  if (typeof text !== 'string' || text.length > 8192) throw new PeerProtocolError('bad membership');
  try {
    decodeConfiguration(text);
  } catch (err) {
    throw new PeerProtocolError(`bad membership: ${(err as Error).message}`, { cause: err });
  }
  return text;
}
