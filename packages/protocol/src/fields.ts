/**
 * Byte-level field scanning shared by the request and reply parsers.
 *
 * A line is split on single spaces (0x20). While splitting, each field is
 * classified so that key validation needs no second pass: does it hold a
 * byte below 0x21 or 0x7F (never allowed in a key), or a byte >= 0x80 (then
 * the field must be checked as UTF-8 before it is decoded).
 */
import { isUtf8 } from 'node:buffer';
import { MAX_KEY_BYTES, MAX_TOKEN } from './limits.js';

/** Field boundaries of the line being parsed: [start0, end0, start1, end1, ...]. */
export const fieldBounds = new Int32Array(16);
const FIELD_CTL = 1;
const FIELD_HIGH = 2;
/** Per-field flags (FIELD_CTL | FIELD_HIGH) of the line being parsed. */
const fieldFlags = new Uint8Array(8);

/** Beyond this many fields a line is wrong for every op; counting stops there. */
const MAX_FIELDS = 8;

/**
 * Splits `buf[start, end)` into fields. Returns the field count (at most
 * MAX_FIELDS; more is reported as MAX_FIELDS), or -1 if a field is empty
 * (empty line, leading, trailing or double space).
 */
export function splitFields(buf: Uint8Array, start: number, end: number): number {
  if (start >= end) return -1;
  let count = 0;
  let fieldStart = start;
  let flags = 0;
  for (let i = start; i < end; i++) {
    const b = buf[i]!;
    if (b === 0x20) {
      if (i === fieldStart) return -1;
      if (count < MAX_FIELDS) {
        fieldBounds[2 * count] = fieldStart;
        fieldBounds[2 * count + 1] = i;
        fieldFlags[count] = flags;
        count++;
      }
      fieldStart = i + 1;
      flags = 0;
    } else if (b < 0x21 || b === 0x7f) {
      flags |= FIELD_CTL;
    } else if (b >= 0x80) {
      flags |= FIELD_HIGH;
    }
  }
  if (fieldStart === end) return -1;
  if (count < MAX_FIELDS) {
    fieldBounds[2 * count] = fieldStart;
    fieldBounds[2 * count + 1] = end;
    fieldFlags[count] = flags;
    count++;
  }
  return count;
}

export function fieldStart(i: number): number {
  return fieldBounds[2 * i]!;
}

export function fieldEnd(i: number): number {
  return fieldBounds[2 * i + 1]!;
}

/** True if field `i` is exactly the single byte `ch`. */
export function fieldIs(buf: Uint8Array, i: number, ch: number): boolean {
  const s = fieldStart(i);
  return fieldEnd(i) - s === 1 && buf[s] === ch;
}

/** Why a field is not a valid key: numbers, so they never collide with a key string. */
export const KEY_TOO_LONG = 1;
export const KEY_CONTROL = 2;
export const KEY_BAD_UTF8 = 3;
export type KeyProblem = typeof KEY_TOO_LONG | typeof KEY_CONTROL | typeof KEY_BAD_UTF8;

/**
 * Checks field `i` as a key (1..250 bytes of valid UTF-8, no byte below
 * 0x21, no 0x7F) and returns its string, or the problem.
 */
export function readKeyField(buf: Uint8Array, i: number): string | KeyProblem {
  const s = fieldStart(i);
  const e = fieldEnd(i);
  if (e - s > MAX_KEY_BYTES) return KEY_TOO_LONG;
  return readWordField(buf, i);
}

/** Like a key but without the length limit (client tokens, node names). */
export function readWordField(buf: Uint8Array, i: number): string | KeyProblem {
  const s = fieldStart(i);
  const e = fieldEnd(i);
  const flags = fieldFlags[i]!;
  if (flags & FIELD_CTL) return KEY_CONTROL;
  const b = buf as Buffer;
  if (flags & FIELD_HIGH) {
    const bytes = b.subarray(s, e);
    if (!isUtf8(bytes)) return KEY_BAD_UTF8;
    return b.toString('utf8', s, e);
  }
  return latin1(b, s, e);
}

/**
 * `buf.toString('latin1', s, e)` without its argument checks and encoding
 * lookup (a key per request: about a fifth of what decoding one costs);
 * Node's own `latin1Slice` where it has one.
 */
const latin1: (b: Buffer, s: number, e: number) => string =
  typeof (Buffer.prototype as { latin1Slice?: unknown }).latin1Slice === 'function'
    ? (b, s, e) => (b as Buffer & { latin1Slice(s: number, e: number): string }).latin1Slice(s, e)
    : (b, s, e) => b.toString('latin1', s, e);

/** Result of reading a small decimal number: the value, or one of these. */
export const NUM_SYNTAX = -1;
export const NUM_TOO_BIG = -2;

/**
 * Reads field `i` as an unsigned decimal without sign or leading zeros.
 * Values above `max` give NUM_TOO_BIG (still a well-formed number).
 */
export function readSmallNumber(buf: Uint8Array, i: number, max: number): number {
  const s = fieldStart(i);
  const e = fieldEnd(i);
  let value = 0;
  for (let p = s; p < e; p++) {
    const d = buf[p]! - 0x30;
    if (d < 0 || d > 9) return NUM_SYNTAX;
    if (d === 0 && p === s && e - s > 1) return NUM_SYNTAX;
    value = value * 10 + d;
  }
  // Checked after the loop so that "99x" is a syntax error, not a range one.
  return value > max ? NUM_TOO_BIG : value;
}

/** Reads field `i` as a token 1..2^64-1: the value, NUM_SYNTAX or NUM_TOO_BIG (0 counts as out of range). */
export function readToken(buf: Uint8Array, i: number): bigint | typeof NUM_SYNTAX | typeof NUM_TOO_BIG {
  const s = fieldStart(i);
  const e = fieldEnd(i);
  for (let p = s; p < e; p++) {
    const d = buf[p]! - 0x30;
    if (d < 0 || d > 9) return NUM_SYNTAX;
  }
  if (buf[s] === 0x30) return e - s === 1 ? NUM_TOO_BIG : NUM_SYNTAX;
  if (e - s > 20) return NUM_TOO_BIG;
  if (e - s <= 15) return BigInt(decimalValue(buf, s, e));
  // Up to 20 digits: two exact doubles (the last 9 digits and the rest, at
  // most 11), no string to build first. Server tokens are 18-19 digits.
  const value = BigInt(decimalValue(buf, s, e - 9)) * 1_000_000_000n + BigInt(decimalValue(buf, e - 9, e));
  return value > MAX_TOKEN ? NUM_TOO_BIG : value;
}

/** The value of the decimal digits `buf[s, e)` (at most 15 of them: exact as a double). */
function decimalValue(buf: Uint8Array, s: number, e: number): number {
  let n = 0;
  for (let p = s; p < e; p++) n = n * 10 + (buf[p]! - 0x30);
  return n;
}

/** Short, printable excerpt of a field for error texts (never the whole line). */
export function describeField(buf: Uint8Array, i: number): string {
  const s = fieldStart(i);
  const e = Math.min(fieldEnd(i), s + 16);
  let out = '';
  for (let p = s; p < e; p++) {
    const b = buf[p]!;
    out += b >= 0x21 && b < 0x7f ? String.fromCharCode(b) : '?';
  }
  return fieldEnd(i) > e ? `${out}...` : out;
}
