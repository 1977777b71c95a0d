/**
 * String-level helpers for callers that hold text rather than bytes
 * (clients checking arguments before sending, tests, tools).
 */
import type { WireError } from './errors.js';
import { MAX_KEY_BYTES } from './limits.js';
import { parseReply, type Reply } from './reply.js';
import { parseRequest, type Request } from './request.js';

/** Why `key` cannot be sent as a key, or undefined when it can. */
export function keyError(key: string): string | undefined {
  if (typeof key !== 'string' || key.length === 0) return 'a key must be a non-empty string';
  const bytes = Buffer.byteLength(key, 'utf8');
  if (bytes > MAX_KEY_BYTES) return `a key is at most ${MAX_KEY_BYTES} bytes of UTF-8 (this one has ${bytes})`;
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x20\x7f]/.test(key)) return 'a key cannot contain spaces or control characters';
  if (!key.isWellFormed()) return 'a key must be valid Unicode (no lone surrogates)';
  return undefined;
}

/** Parses a request from text; the text is one line without `\n`. */
export function parseRequestLine(line: string): Request | WireError {
  const buf = Buffer.from(line, 'utf8');
  return parseRequest(buf, 0, buf.length);
}

/** Parses a reply from text; the text is one line without `\n`. */
export function parseReplyLine(line: string): Reply | WireError {
  const buf = Buffer.from(line, 'utf8');
  return parseReply(buf, 0, buf.length);
}
