/**
 * Requests (client to server): parse and format. Pure: no I/O, no clock.
 */
import { WireError } from './errors.js';
import {
  KEY_BAD_UTF8,
  KEY_CONTROL,
  KEY_TOO_LONG,
  NUM_SYNTAX,
  NUM_TOO_BIG,
  describeField,
  fieldIs,
  readKeyField,
  readSmallNumber,
  readToken,
  readWordField,
  splitFields,
  type KeyProblem,
} from './fields.js';
import { MAX_LEASE_SECONDS, MAX_WAIT_SECONDS, MIN_LEASE_SECONDS } from './limits.js';

export interface HelloRequest {
  readonly op: 'H';
  readonly version: 1;
  /** The secret from the server's `client_tokens`, if the client sent one. */
  readonly clientToken: string | undefined;
}
export interface AcquireRequest {
  readonly op: 'A';
  readonly key: string;
  readonly waitSeconds: number;
  readonly leaseSeconds: number;
}
export interface ReleaseRequest {
  readonly op: 'R';
  readonly key: string;
  readonly token: bigint;
}
/** `X <key> <token> <lease>`: extend exactly that grant; its lease becomes `leaseSeconds` from when the server received it. */
export interface ExtendRequest {
  readonly op: 'X';
  readonly key: string;
  readonly token: bigint;
  readonly leaseSeconds: number;
}
export interface PingRequest {
  readonly op: 'P';
}
export type Request = HelloRequest | AcquireRequest | ReleaseRequest | ExtendRequest | PingRequest;

const OP_A = 0x41;
const OP_H = 0x48;
const OP_P = 0x50;
const OP_R = 0x52;
const OP_X = 0x58;

const PING: PingRequest = { op: 'P' };

export function keyProblemText(problem: KeyProblem): string {
  switch (problem) {
    case KEY_TOO_LONG:
      return 'bad key: longer than 250 bytes';
    case KEY_BAD_UTF8:
      return 'bad key: invalid UTF-8';
    case KEY_CONTROL:
      return 'bad key: control character or DEL';
  }
}

/**
 * Parses one request line: `buf[start, end)` without its `\n` (and without
 * the `\r` before it; the line framer strips both). Returns the request, or
 * the WireError the server must answer with.
 */
export function parseRequest(buf: Uint8Array, start: number, end: number): Request | WireError {
  const n = splitFields(buf, start, end);
  if (n < 0) {
    return new WireError(
      'proto',
      start === end ? 'empty line' : 'fields must be separated by exactly one space',
    );
  }
  if (fieldIs(buf, 0, OP_A)) return parseAcquire(buf, n);
  if (fieldIs(buf, 0, OP_R)) return parseRelease(buf, n);
  if (fieldIs(buf, 0, OP_X)) return parseExtend(buf, n);
  if (fieldIs(buf, 0, OP_P)) return n === 1 ? PING : new WireError('proto', 'expected 1 field');
  if (fieldIs(buf, 0, OP_H)) return parseHello(buf, n);
  return new WireError('proto', `unknown op "${describeField(buf, 0)}"`);
}

function parseAcquire(buf: Uint8Array, n: number): AcquireRequest | WireError {
  if (n !== 4) return new WireError('proto', 'expected 4 fields');
  const key = readKeyField(buf, 1);
  if (typeof key !== 'string') return new WireError('proto', keyProblemText(key));
  const waitSeconds = readSmallNumber(buf, 2, MAX_WAIT_SECONDS);
  if (waitSeconds === NUM_SYNTAX) return new WireError('proto', 'bad number for wait');
  if (waitSeconds === NUM_TOO_BIG) return new WireError('range', `wait must be 0..${MAX_WAIT_SECONDS} seconds`);
  const leaseSeconds = readLease(buf, 3);
  if (leaseSeconds instanceof WireError) return leaseSeconds;
  return { op: 'A', key, waitSeconds, leaseSeconds };
}

function parseRelease(buf: Uint8Array, n: number): ReleaseRequest | WireError {
  if (n !== 3) return new WireError('proto', 'expected 3 fields');
  const key = readKeyField(buf, 1);
  if (typeof key !== 'string') return new WireError('proto', keyProblemText(key));
  const token = readTokenField(buf, 2);
  if (token instanceof WireError) return token;
  return { op: 'R', key, token };
}

function parseExtend(buf: Uint8Array, n: number): ExtendRequest | WireError {
  if (n !== 4) return new WireError('proto', 'expected 4 fields');
  const key = readKeyField(buf, 1);
  if (typeof key !== 'string') return new WireError('proto', keyProblemText(key));
  const token = readTokenField(buf, 2);
  if (token instanceof WireError) return token;
  const leaseSeconds = readLease(buf, 3);
  if (leaseSeconds instanceof WireError) return leaseSeconds;
  return { op: 'X', key, token, leaseSeconds };
}

function readLease(buf: Uint8Array, field: number): number | WireError {
  const leaseSeconds = readSmallNumber(buf, field, MAX_LEASE_SECONDS);
  if (leaseSeconds === NUM_SYNTAX) return new WireError('proto', 'bad number for lease');
  if (leaseSeconds === NUM_TOO_BIG || leaseSeconds < MIN_LEASE_SECONDS) {
    return new WireError('range', `lease must be ${MIN_LEASE_SECONDS}..${MAX_LEASE_SECONDS} seconds`);
  }
  return leaseSeconds;
}

function readTokenField(buf: Uint8Array, field: number): bigint | WireError {
  const token = readToken(buf, field);
  if (token === NUM_SYNTAX) return new WireError('proto', 'bad number for token');
  if (token === NUM_TOO_BIG) return new WireError('range', 'token must be 1..18446744073709551615');
  return token;
}

function parseHello(buf: Uint8Array, n: number): HelloRequest | WireError {
  if (n !== 2 && n !== 3) return new WireError('proto', 'expected 2 or 3 fields');
  const version = readSmallNumber(buf, 1, 1_000_000);
  if (version === NUM_SYNTAX) return new WireError('proto', 'bad number for protocol version');
  if (version !== 1) return new WireError('range', 'unsupported protocol version: this server speaks 1');
  if (n === 2) return { op: 'H', version: 1, clientToken: undefined };
  const clientToken = readWordField(buf, 2);
  if (typeof clientToken !== 'string') return new WireError('proto', 'bad client token');
  return { op: 'H', version: 1, clientToken };
}

/** Formats a request line, `\n` included. The caller validates the fields. */
export function formatRequest(request: Request): string {
  switch (request.op) {
    case 'A':
      return `A ${request.key} ${request.waitSeconds} ${request.leaseSeconds}\n`;
    case 'R':
      return `R ${request.key} ${request.token}\n`;
    case 'X':
      return `X ${request.key} ${request.token} ${request.leaseSeconds}\n`;
    case 'P':
      return 'P\n';
    case 'H':
      return request.clientToken === undefined ? 'H 1\n' : `H 1 ${request.clientToken}\n`;
  }
}
