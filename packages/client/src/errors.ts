/**
 * Every error the client raises is a `TicketingError` subclass with a stable
 * `code` (CLIENT.md; the JVM client uses the same codes). docs/client-errors.md
 * lists them all, and a test fails when this file and that page disagree.
 */

export const ERROR_CODES = [
  'INVALID_ARGUMENT',
  'NO_CONNECTION',
  'TIMEOUT',
  'CAPACITY',
  'INDETERMINATE',
  'INSUFFICIENT_LEASE',
  'LEASE_ENDED',
  'RELEASED',
  'RELEASE_FAILED',
  'CLOSED',
  'PROTOCOL',
  'AUTH',
  'PERMISSION',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

export abstract class TicketingError extends Error {
  abstract readonly code: ErrorCode;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A bad argument (key, duration, address, option). Nothing was sent. */
export class InvalidArgumentError extends TicketingError {
  readonly code = 'INVALID_ARGUMENT';
}

/** No connection was usable, so nothing was sent. */
export class NoConnectionError extends TicketingError {
  readonly code = 'NO_CONNECTION';
}

/** Base of the errors about one key. */
abstract class KeyError extends TicketingError {
  constructor(
    readonly key: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** `T`: the wait ran out without a grant. Nothing is held. */
export class TimeoutError extends KeyError {
  readonly code = 'TIMEOUT';
}

/** `B`: a server limit was reached. Nothing changed on the server; retry later as a new acquire. */
export class CapacityError extends KeyError {
  readonly code = 'CAPACITY';
}

/**
 * The acquire may have reached the server but its reply was lost: the lock
 * may or may not have been granted (it then ends with its lease). The client
 * never re-sends such an acquire; do not enter the critical section.
 */
export class IndeterminateError extends KeyError {
  readonly code = 'INDETERMINATE';
}

/**
 * Granted, but less lease was left than `minWorkMs` (or none) by the time
 * the reply arrived. The client releases that token in the background.
 */
export class InsufficientLeaseError extends KeyError {
  readonly code = 'INSUFFICIENT_LEASE';

  constructor(
    key: string,
    readonly token: bigint,
    readonly remainingMs: number,
    readonly minWorkMs: number,
  ) {
    super(key, `granted ${key} with ${Math.max(0, Math.floor(remainingMs))} ms of lease left, less than minWorkMs ${minWorkMs}; releasing it`);
  }
}

/** Reason of `ticket.signal` when the conservative lease end is reached. */
export class LeaseEndedError extends KeyError {
  readonly code = 'LEASE_ENDED';
}

/** Reason of `ticket.signal` when the ticket was released. */
export class ReleasedError extends KeyError {
  readonly code = 'RELEASED';
}

/** A release got no final reply within 5 s: the lock may still be held until its lease ends. */
export class ReleaseFailedError extends KeyError {
  readonly code = 'RELEASE_FAILED';

  constructor(
    key: string,
    readonly token: bigint,
    options?: { cause?: unknown },
  ) {
    super(key, `no reply to the release of ${key} (token ${token}) within 5 s; it is held until its lease ends unless an attempt got through`, options);
  }
}

/** The broker was closed. */
export class ClosedError extends TicketingError {
  readonly code = 'CLOSED';
}

/** The server sent something the protocol does not allow, or an `E` line. */
export class ProtocolError extends TicketingError {
  readonly code = 'PROTOCOL';

  constructor(
    message: string,
    options?: { cause?: unknown },
    /** The code of the server's `E` line, when that is what ended the session. */
    readonly serverCode?: string,
  ) {
    super(message, options);
  }
}

/** The server refused the client token (`E auth`). */
export class AuthError extends TicketingError {
  readonly code = 'AUTH';
}

/**
 * `E perm`: the server refused a key outside the key prefixes of the client
 * identity, and closed that connection. The `E` line names no key, so an
 * acquire gets this error only when it was the one request unanswered on that
 * connection (nothing was granted; it is not retried). With several
 * unanswered, which one was refused is unknown and another may have been
 * granted just before: those acquires reject with `IndeterminateError`.
 */
export class PermissionError extends TicketingError {
  readonly code = 'PERMISSION';
}
