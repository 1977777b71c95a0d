/**
 * Replies (server to client): parse and format. Pure: no I/O, no clock.
 */
import { ERROR_CODES, WireError, type ErrorCode } from './errors.js';
import {
  fieldEnd,
  fieldIs,
  fieldStart,
  readKeyField,
  readSmallNumber,
  readToken,
  readWordField,
  splitFields,
} from './fields.js';
import { MAX_LINE_BYTES } from './limits.js';

export interface HelloReply {
  readonly op: 'H';
  readonly nodeName: string;
}
/** `A <token> <key>`: granted. */
export interface GrantedReply {
  readonly op: 'A';
  readonly token: bigint;
  readonly key: string;
}
/** `T`: wait ran out; `B`: capacity; `R`: released; `N`: not released; `X`: extended; `G`: not extended (the grant is gone). */
export interface KeyReply {
  readonly op: 'T' | 'B' | 'R' | 'N' | 'X' | 'G';
  readonly key: string;
}
export interface PongReply {
  readonly op: 'P';
}
/** `M <host:port>`, or `M -` (address undefined) when no active node is known. */
export interface RedirectReply {
  readonly op: 'M';
  readonly address: string | undefined;
}
export interface ErrorReply {
  readonly op: 'E';
  /** One word; a known ErrorCode from this server, possibly another from a newer one. */
  readonly code: string;
  readonly text: string;
}
export type Reply = HelloReply | GrantedReply | KeyReply | PongReply | RedirectReply | ErrorReply;

const KEY_OPS: Record<number, KeyReply['op']> = { 0x54: 'T', 0x42: 'B', 0x52: 'R', 0x4e: 'N', 0x58: 'X', 0x47: 'G' };

/**
 * Parses one reply line (without `\n` / `\r\n`). Anything that is not a
 * well-formed reply of PROTOCOL.md is a WireError (code `proto`): a client
 * treats it as session-fatal.
 */
export function parseReply(buf: Uint8Array, start: number, end: number): Reply | WireError {
  if (end - start > MAX_LINE_BYTES) return new WireError('toolong', 'reply longer than 512 bytes');
  // E's text is free-form, so it is split by hand before the strict field rules apply.
  if (end - start >= 1 && buf[start] === 0x45 && (end - start === 1 || buf[start + 1] === 0x20)) {
    return parseErrorReply(buf, start, end);
  }
  const n = splitFields(buf, start, end);
  if (n < 0) return new WireError('proto', 'malformed reply: bad spacing');
  if (n === 2) {
    const op = fieldEnd(0) - fieldStart(0) === 1 ? KEY_OPS[buf[fieldStart(0)]!] : undefined;
    if (op !== undefined) {
      const key = readKeyField(buf, 1);
      if (typeof key !== 'string') return new WireError('proto', 'malformed reply: bad key');
      return { op, key };
    }
    if (fieldIs(buf, 0, 0x4d)) return parseRedirect(buf);
  }
  if (n === 3 && fieldIs(buf, 0, 0x41)) {
    const token = readToken(buf, 1);
    if (typeof token !== 'bigint') return new WireError('proto', 'malformed reply: bad token');
    const key = readKeyField(buf, 2);
    if (typeof key !== 'string') return new WireError('proto', 'malformed reply: bad key');
    return { op: 'A', token, key };
  }
  if (n === 1 && fieldIs(buf, 0, 0x50)) return { op: 'P' };
  if (n === 3 && fieldIs(buf, 0, 0x48)) {
    if (readSmallNumber(buf, 1, 1) !== 1) return new WireError('proto', 'malformed reply: bad protocol version');
    const nodeName = readWordField(buf, 2);
    if (typeof nodeName !== 'string') return new WireError('proto', 'malformed reply: bad node name');
    return { op: 'H', nodeName };
  }
  return new WireError('proto', 'malformed or unknown reply');
}

function parseRedirect(buf: Uint8Array): RedirectReply | WireError {
  const address = readWordField(buf, 1);
  if (typeof address !== 'string') return new WireError('proto', 'malformed reply: bad address');
  if (address === '-') return { op: 'M', address: undefined };
  if (!isHostPort(address)) return new WireError('proto', 'malformed reply: bad address');
  return { op: 'M', address };
}

function parseErrorReply(buf: Uint8Array, start: number, end: number): ErrorReply | WireError {
  const b = buf as Buffer;
  let codeEnd = b.indexOf(0x20, start + 2);
  if (codeEnd < 0 || codeEnd > end) codeEnd = end;
  if (codeEnd <= start + 2) return new WireError('proto', 'malformed reply: E without a code');
  const code = b.toString('latin1', start + 2, codeEnd);
  if (!/^[a-z]+$/.test(code)) return new WireError('proto', 'malformed reply: bad error code');
  const text = codeEnd < end ? b.toString('utf8', codeEnd + 1, end) : '';
  return { op: 'E', code, text };
}

/** `host:port` with a port 1..65535; IPv6 hosts in brackets. */
export function isHostPort(address: string): boolean {
  const colon = address.lastIndexOf(':');
  if (colon <= 0) return false;
  const port = address.slice(colon + 1);
  if (!/^[1-9][0-9]{0,4}$/.test(port) || Number(port) > 65535) return false;
  const host = address.slice(0, colon);
  if (host.startsWith('[')) return host.endsWith(']') && host.length > 2;
  return !host.includes(':');
}

export function isKnownErrorCode(code: string): code is ErrorCode {
  return (ERROR_CODES as readonly string[]).includes(code);
}

/** Formats a reply line, `\n` included. */
export function formatReply(reply: Reply): string {
  switch (reply.op) {
    case 'H':
      return `H 1 ${reply.nodeName}\n`;
    case 'A':
      return formatGranted(reply.token, reply.key);
    case 'T':
    case 'B':
    case 'R':
    case 'N':
    case 'X':
    case 'G':
      return formatKeyReply(reply.op, reply.key);
    case 'P':
      return 'P\n';
    case 'M':
      return `M ${reply.address ?? '-'}\n`;
    case 'E':
      return formatError(reply.code, reply.text);
  }
}

/** `A <token> <key>\n`: formatReply for a grant, without building the reply object (a server's hot path). */
export function formatGranted(token: bigint, key: string): string {
  return `A ${token} ${key}\n`;
}

/** `T|B|R|N|X|G <key>\n`: formatReply for a key reply, without building the reply object. */
export function formatKeyReply(op: KeyReply['op'], key: string): string {
  return `${op} ${key}\n`;
}

/**
 * `E <code> <text>\n`, with the text made safe for one line: no line breaks,
 * no control characters, and the whole line within 512 bytes.
 */
export function formatError(code: string, text: string): string {
  // eslint-disable-next-line no-control-regex
  let safe = text.replace(/[\x00-\x1f\x7f]/g, ' ').trim();
  const room = MAX_LINE_BYTES - code.length - 3;
  if (Buffer.byteLength(safe) > room) {
    safe = Buffer.from(safe).subarray(0, room).toString('utf8').replace(/\uFFFD$/, '');
  }
  return safe === '' ? `E ${code}\n` : `E ${code} ${safe}\n`;
}
