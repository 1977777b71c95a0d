/**
 * The priority cluster's peer protocol (versions 2 and 3): text lines, one
 * message each. Pure: encode, decode and bound values only. Each node writes
 * only on its outbound link to a peer and reads only from the peer's inbound
 * link; each link runs at the version its handshake negotiated
 * (peers/handshake.ts), and a line that version does not have closes it.
 *
 *   (after the link's handshake, see peers/handshake.ts)
 *   HB <role> <epoch> <established> <position> <eligible> <next-token> <following|-> <heard|->
 *      <wall-ms> <mono-us> <echo-mono-us|-> <hold-us>
 *        role: starting | standby | candidate | active | stopping
 *        epoch: the activation this node's table comes from (an active: its own; 0: no table)
 *        established: 1 when that table descends from a replicated one (or a standby confirmed it)
 *        position: commands of that activation's stream this table has applied
 *        eligible: 1 when this node could become active now (no clock or peer refusal blocks it)
 *        heard: the peers heard within the failover timeout, comma-separated
 *        wall-ms, mono-us: the sender's clocks; echo-mono-us: the mono stamp of the last
 *        heartbeat it got from the recipient, held hold-us before this one (clock offsets)
 *   FOLLOW <epoch>                        standby -> active: send me your stream of `epoch`
 *   SNAP <epoch> <position> <next-token> <count>   active -> standby: a snapshot at `position` follows
 *   S <key> <token> <lease-ms> <remaining-ms> [~<owner>]   one held lock of the snapshot
 *   SNAPEND                               end of snapshot; the commands after `position` follow
 *   G <key> <lease-ms> <token> | R <key> <token> | X <key> <token> | L <key> <token> <lease-ms> | F <token>
 *                                         grant, release, expire, extend, token floor
 *   ACK <epoch> <position>                standby -> active: applied through `position`
 *   HANDOFF <epoch> <position>            active -> successor: take over after `position`
 *   TAKEN <epoch> <next-token>            successor -> old active: serving now, in `epoch`
 *
 * Version 3 adds the successor's "no" to a hand-off:
 *
 *   HANDOFF <epoch> <position> <serial>   as above; `serial` names this hand-off among the active's
 *   DECLINED <epoch> <serial> <reason>    successor -> old active: it does not take over from hand-off
 *                                         `serial` of `epoch` (reason: behind | ineligible |
 *                                         not-following); the old active moves on at once instead of
 *                                         waiting out HANDOFF_TIMEOUT_MS (role-machine.ts)
 *
 * Every number is bounded here (u64 tokens, safe integers, node names as
 * the peers setting allows them); what depends on this node's clock (a
 * token far beyond it) is bounded where it is used (priority-mode.ts).
 */
import { CommandFormatError, PeerProtocolError } from '../errors.js';
import {
  big,
  decodeCommandBytes,
  decodeCommandWithToken,
  encodeCommand,
  int,
  isCommandOp,
  word,
  type DecodedCommand,
} from '../state-machine/command-codec.js';
import type { Command, Token } from '../state-machine/commands.js';
import { checkCommand, checkCommandFields, checkToken, IDENTITY_NAME, MAX_LEASE_MS } from '../state-machine/command-check.js';
import { keyError, MAX_TOKEN } from '@ticketing/protocol';

export type PeerRole = 'starting' | 'standby' | 'candidate' | 'active' | 'stopping';

/** What a node says about itself, to each peer, every heartbeat interval (see the header). */
export interface Heartbeat {
  readonly type: 'heartbeat';
  readonly role: PeerRole;
  readonly epoch: Token;
  readonly established: boolean;
  readonly position: number;
  readonly eligible: boolean;
  readonly nextToken: Token;
  readonly following: string | undefined;
  readonly heard: readonly string[];
  /** Sender's wall clock, ms since the Unix epoch. */
  readonly wall: number;
  /** Sender's monotonic clock, ms (microsecond precision). */
  readonly mono: number;
  /** The last heartbeat it got from the recipient: that one's mono stamp, and how long it was held (ms). */
  readonly echo: { readonly mono: number; readonly holdMs: number } | undefined;
}

export type PeerMessage =
  | Heartbeat
  | { type: 'follow'; epoch: Token }
  | { type: 'snapshot'; epoch: Token; position: number; nextToken: Token; count: number }
  | { type: 'snapshot-lock'; key: string; token: Token; leaseMs: number; remainingMs: number; owner?: string }
  | { type: 'snapshot-end' }
  | DecodedCommand
  | { type: 'ack'; epoch: Token; position: number }
  /** `serial`: version 3 only (undefined: a version-2 HANDOFF, which nobody answers with DECLINED). */
  | { type: 'handoff'; epoch: Token; position: number; serial?: number }
  | { type: 'taken'; epoch: Token; nextToken: Token }
  /** Version 3 only. */
  | { type: 'declined'; epoch: Token; serial: number; reason: DeclineReason };

/** Why a successor declines a hand-off (version 3's DECLINED). */
export type DeclineReason = 'behind' | 'ineligible' | 'not-following';
const DECLINE_REASONS: readonly DeclineReason[] = ['behind', 'ineligible', 'not-following'];

/** The peer protocol versions this codec speaks (see peers/handshake.ts). */
export type PriorityProtocol = 2 | 3;

/** Most a stream position can be: a count of commands, far below 2^53. */
const MAX_POSITION = 2 ** 50;
/** Most a hand-off serial can be (one per hand-off an active starts). */
const MAX_SERIAL = 2 ** 48;
/** Wall clocks in heartbeats: the Unix epoch up to the year 4000 (about 6.4e13 ms). */
const MAX_WALL_MS = 64_000_000_000_000;
/** How long a heartbeat can say it held the one it echoes: a peer that heard nothing for longer echoes nothing. */
const MAX_HOLD_US = 600_000_000;

const ROLES: readonly PeerRole[] = ['starting', 'standby', 'candidate', 'active', 'stopping'];

/** The shared codec's field and command errors, as PeerProtocolErrors (the link is closed). */
function malformed(err: unknown): never {
  if (err instanceof CommandFormatError) throw new PeerProtocolError(err.message, { cause: err });
  throw err;
}

/** A replicated command must carry values a client could have caused (see command-check.ts). */
function replicated(d: DecodedCommand): DecodedCommand {
  if (d.command.type === 'grant' && d.token === undefined) throw new PeerProtocolError('replicated grant without its token');
  checkCommand(d.command);
  checkToken(d.token);
  return d;
}

/** Exactly `n` fields, or the line is malformed (trailing fields are not ignored). */
function fields(f: string[], n: number): string[] {
  if (f.length !== n) throw new PeerProtocolError(`${f[0]} takes ${n - 1} fields, got ${f.length - 1}`);
  return f;
}

/** A token inside u64 (0 allowed: an empty stream's next token is never 0, but a floor may be). */
function tokenField(text: string | undefined): Token {
  const t = big(text);
  if (t > MAX_TOKEN) throw new PeerProtocolError(`token ${t} is above 2^64-1`);
  return t;
}

/** A key a client could have sent. */
function keyField(text: string | undefined): string {
  const k = word(text);
  if (keyError(k) !== undefined) throw new PeerProtocolError('bad key');
  return k;
}

/**
 * Decodes one line (without `\n`) of a link at peer protocol `version`.
 * Throws PeerProtocolError on anything malformed, or not part of `version`.
 */
export function decodePeerMessage(line: string, version: PriorityProtocol): PeerMessage {
  try {
    return decodeFields(line, line.split(' '), version);
  } catch (err) {
    return malformed(err);
  }
}

function decodeFields(line: string, f: string[], version: PriorityProtocol): PeerMessage {
  if (isCommandOp(f[0])) {
    checkCommandFields(line, true);
    return replicated(decodeCommandWithToken(line));
  }
  switch (f[0]) {
    case 'S': {
      const owner = f.length === 6 && f[5]!.startsWith('~') ? f.pop()!.slice(1) : undefined;
      if (owner !== undefined && !IDENTITY_NAME.test(owner)) throw new PeerProtocolError('bad owner');
      fields(f, 5);
      const leaseMs = int(f[3]);
      const remainingMs = int(f[4]);
      if (leaseMs < 1 || leaseMs > MAX_LEASE_MS || remainingMs > MAX_LEASE_MS + 1_000) throw new PeerProtocolError('snapshot lock lease out of range');
      const token = tokenField(f[2]);
      checkToken(token);
      return { type: 'snapshot-lock', key: keyField(f[1]), token, leaseMs, remainingMs, ...(owner === undefined ? {} : { owner }) };
    }
    case 'ACK':
      fields(f, 3);
      return { type: 'ack', epoch: tokenField(f[1]), position: position(f[2]) };
    case 'HB':
      return heartbeat(fields(f, 13));
    case 'FOLLOW':
      return { type: 'follow', epoch: tokenField(fields(f, 2)[1]) };
    case 'SNAP':
      fields(f, 5);
      return { type: 'snapshot', epoch: tokenField(f[1]), position: position(f[2]), nextToken: tokenField(f[3]), count: int(f[4]) };
    case 'SNAPEND':
      fields(f, 1);
      return { type: 'snapshot-end' };
    case 'HANDOFF':
      if (version === 2) {
        fields(f, 3);
        return { type: 'handoff', epoch: tokenField(f[1]), position: position(f[2]) };
      }
      fields(f, 4);
      return { type: 'handoff', epoch: tokenField(f[1]), position: position(f[2]), serial: serial(f[3]) };
    case 'DECLINED': {
      if (version === 2) throw new PeerProtocolError('DECLINED is not part of peer protocol 2');
      fields(f, 4);
      const reason = DECLINE_REASONS.find((r) => r === f[3]);
      if (reason === undefined) throw new PeerProtocolError(`bad reason ${JSON.stringify(f[3]!.slice(0, 20))}`);
      return { type: 'declined', epoch: tokenField(f[1]), serial: serial(f[2]), reason };
    }
    case 'TAKEN':
      fields(f, 3);
      return { type: 'taken', epoch: tokenField(f[1]), nextToken: tokenField(f[2]) };
    default:
      throw new PeerProtocolError(`unknown peer message ${JSON.stringify(line.slice(0, 20))}`);
  }
}

function heartbeat(f: string[]): Heartbeat {
  const [, roleText, epoch, established, pos, eligible, next, following, heard, wallText, mono, echoMono, holdText] = f;
  const role = roleText as PeerRole;
  if (!ROLES.includes(role)) throw new PeerProtocolError(`bad role ${roleText?.slice(0, 20)}`);
  const wall = int(wallText);
  if (wall > MAX_WALL_MS) throw new PeerProtocolError(`wall clock ${wall} ms is beyond the year 4000`);
  const hold = int(holdText);
  if (hold > MAX_HOLD_US) throw new PeerProtocolError(`echo held ${hold} us, longer than any heartbeat is kept`);
  return {
    type: 'heartbeat',
    role,
    epoch: tokenField(epoch),
    established: flag(established),
    position: position(pos),
    eligible: flag(eligible),
    nextToken: tokenField(next),
    following: following === '-' ? undefined : nodeName(following),
    heard: heard === '-' ? [] : heard!.split(',').map(nodeName),
    wall,
    mono: micros(mono),
    echo: echoMono === '-' ? undefined : { mono: micros(echoMono), holdMs: hold / 1000 },
  };
}

function flag(text: string | undefined): boolean {
  if (text !== '0' && text !== '1') throw new PeerProtocolError(`expected 0 or 1, got ${JSON.stringify(text?.slice(0, 20))}`);
  return text === '1';
}

function serial(text: string | undefined): number {
  const n = int(text);
  if (n < 1 || n > MAX_SERIAL) throw new PeerProtocolError(`hand-off serial ${n} out of range`);
  return n;
}

function position(text: string | undefined): number {
  const n = int(text);
  if (n > MAX_POSITION) throw new PeerProtocolError(`stream position ${n} is beyond any stream`);
  return n;
}

/** A monotonic stamp in whole microseconds, as ms. */
function micros(text: string | undefined): number {
  return int(text) / 1000;
}

/** A node name as the peers setting allows it. */
function nodeName(text: string | undefined): string {
  if (text === undefined || !/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/.test(text)) throw new PeerProtocolError('bad node name');
  return text;
}

/**
 * Decodes one line straight from the bytes. The replicated commands (G, R,
 * X: nearly every line of a busy stream) are parsed without building the
 * line as a string first; anything else goes through decodePeerMessage.
 */
export function decodePeerLine(buf: Buffer, s: number, e: number, version: PriorityProtocol): PeerMessage {
  let d: DecodedCommand | undefined;
  try {
    d = decodeCommandBytes(buf, s, e);
  } catch (err) {
    malformed(err);
  }
  return d === undefined ? decodePeerMessage(buf.toString('utf8', s, e), version) : checked(d);
}

function checked(d: DecodedCommand): DecodedCommand {
  try {
    return replicated(d);
  } catch (err) {
    return malformed(err);
  }
}

/** Encodes a replicated command as a line (with the token a grant received, so replicas can check they agree). */
export function encodeReplicated(c: Command, grantedToken: Token | undefined): string {
  return c.type === 'noop' ? '' : `${encodeCommand(c, grantedToken)}\n`;
}

/** A monotonic stamp as whole microseconds (what `micros` reads back). */
function stamp(ms: number): number {
  return Math.max(0, Math.round(ms * 1000));
}

export function encodePeerMessage(m: Exclude<PeerMessage, { type: 'command' }>): string {
  switch (m.type) {
    case 'heartbeat': {
      const echo = m.echo === undefined ? '- 0' : `${stamp(m.echo.mono)} ${stamp(m.echo.holdMs)}`;
      const heard = m.heard.length === 0 ? '-' : m.heard.join(',');
      return `HB ${m.role} ${m.epoch} ${m.established ? 1 : 0} ${m.position} ${m.eligible ? 1 : 0} ${m.nextToken} ${m.following ?? '-'} ${heard} ${Math.max(0, Math.round(m.wall))} ${stamp(m.mono)} ${echo}\n`;
    }
    case 'follow':
      return `FOLLOW ${m.epoch}\n`;
    case 'snapshot':
      return `SNAP ${m.epoch} ${m.position} ${m.nextToken} ${m.count}\n`;
    case 'snapshot-lock':
      return `S ${m.key} ${m.token} ${m.leaseMs} ${m.remainingMs}${m.owner === undefined ? '' : ` ~${m.owner}`}\n`;
    case 'snapshot-end':
      return 'SNAPEND\n';
    case 'ack':
      return `ACK ${m.epoch} ${m.position}\n`;
    case 'handoff':
      return m.serial === undefined ? `HANDOFF ${m.epoch} ${m.position}\n` : `HANDOFF ${m.epoch} ${m.position} ${m.serial}\n`;
    case 'taken':
      return `TAKEN ${m.epoch} ${m.nextToken}\n`;
    case 'declined':
      return `DECLINED ${m.epoch} ${m.serial} ${m.reason}\n`;
  }
}
