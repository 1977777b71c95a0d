/** The error codes an `E <code> <text>` line may carry (PROTOCOL.md). */
export const ERROR_CODES = ['proto', 'auth', 'perm', 'range', 'toolong', 'unavailable', 'internal'] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/**
 * Why a line could not be parsed. Returned as a value (never thrown) so the
 * hot path stays cheap; `code` is what the server puts in its `E` reply.
 */
export class WireError {
  constructor(
    readonly code: ErrorCode,
    readonly text: string,
  ) {}

  toString(): string {
    return `${this.code}: ${this.text}`;
  }
}

export function isWireError(value: unknown): value is WireError {
  return value instanceof WireError;
}
