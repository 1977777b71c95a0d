/**
 * How much a secret resists guessing, estimated from its text: its length
 * times the bits per character of the character classes it uses (hex digits
 * alone: 4 bits, lower case: 4.7, letters and digits: 5.95, any printable:
 * 6.6). A secret of fewer than 8 distinct characters ("letmeinletmein...")
 * counts as nothing: repetition, not randomness. This cannot tell a random
 * string from a long phrase of words; it refuses what is certainly weak.
 */

/** What a peer token must carry at least: TLS-PSK gives whoever sees one handshake an offline test of a guess. */
export const MIN_SECRET_BITS = 128;

/** The command that makes a good secret, for error and warning lines. */
export const GENERATE_SECRET = 'openssl rand -hex 32';

const MIN_DISTINCT = 8;

export function secretBits(secret: string): number {
  const chars = [...secret];
  if (new Set(chars).size < MIN_DISTINCT) return 0;
  let alphabet: number;
  if (/^[0-9a-f]+$/.test(secret) || /^[0-9A-F]+$/.test(secret)) {
    alphabet = 16;
  } else {
    alphabet = 0;
    if (/[0-9]/.test(secret)) alphabet += 10;
    if (/[a-z]/.test(secret)) alphabet += 26;
    if (/[A-Z]/.test(secret)) alphabet += 26;
    if (/[^0-9a-zA-Z]/.test(secret)) alphabet += 33;
  }
  return Math.floor(chars.length * Math.log2(alphabet));
}

/** True when `secret` carries at least MIN_SECRET_BITS. */
export function strongEnough(secret: string): boolean {
  return secretBits(secret) >= MIN_SECRET_BITS;
}
