/** Numbers fixed by PROTOCOL.md (version 1). */

export const PROTOCOL_VERSION = 1;
export const DEFAULT_PORT = 5225;

/** Longest line, in bytes, not counting its `\n` and an optional `\r` before it. */
export const MAX_LINE_BYTES = 512;
export const MAX_KEY_BYTES = 250;
export const MAX_WAIT_SECONDS = 255;
export const MIN_LEASE_SECONDS = 1;
export const MAX_LEASE_SECONDS = 250;
export const MIN_TOKEN = 1n;
export const MAX_TOKEN = 18446744073709551615n; // 2^64 - 1
