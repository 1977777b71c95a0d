/**
 * Every error the server raises on purpose is a ServerError with a stable
 * `code` (as the client's are TicketingErrors): logs and callers test the
 * code, never the message. The original failure travels as `cause`. Logged
 * through pino's `err` key, so the stack, code and cause are kept.
 */

export const SERVER_ERROR_CODES = [
  /** A configuration value, file or TLS setting is invalid. */
  'CONFIG',
  /** Another live process holds the data directory. */
  'DATA_DIR_IN_USE',
  /** Data on disk cannot be trusted (checksum, gap, unreadable mark); the node refuses to guess. */
  'STORAGE_CORRUPT',
  /** The data directory, or a file in it, has a newer format than this release reads (a newer release wrote it). */
  'STORAGE_FORMAT',
  /** Writing durable state failed (WAL, snapshot, token reservation). */
  'STORAGE_FAILED',
  /** A peer sent something malformed; its link is closed. */
  'PEER_PROTOCOL',
  /** A lock-table command's text is malformed. */
  'COMMAND_FORMAT',
  /** Raft was asked to do something that would break its safety (a bug, never a network fault). */
  'RAFT_SAFETY',
  /** The data directory's token high-water mark is further ahead of the clock than the allowed skew: the clock stepped back. */
  'CLOCK_BEHIND',
  /** A setting that cannot change while the node runs was changed by a reload. */
  'RESTART_REQUIRED',
  /** A Raft membership change or leadership transfer that this node cannot make now (not the leader, another change under way, a bad request). */
  'MEMBERSHIP_REFUSED',
] as const;
export type ServerErrorCode = (typeof SERVER_ERROR_CODES)[number];

export abstract class ServerError extends Error {
  abstract readonly code: ServerErrorCode;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

export class ConfigError extends ServerError {
  readonly code = 'CONFIG';
}

export class DataDirInUseError extends ServerError {
  readonly code = 'DATA_DIR_IN_USE';
}

export class CorruptStorage extends ServerError {
  readonly code = 'STORAGE_CORRUPT';
}

/** A data directory (or a file in it) of a newer format than this release reads. */
export class UnsupportedFormat extends ServerError {
  readonly code = 'STORAGE_FORMAT';
}

export class StorageError extends ServerError {
  readonly code = 'STORAGE_FAILED';
}

export class PeerProtocolError extends ServerError {
  readonly code = 'PEER_PROTOCOL';
}

export class CommandFormatError extends ServerError {
  readonly code = 'COMMAND_FORMAT';
}

export class SafetyViolation extends ServerError {
  readonly code = 'RAFT_SAFETY';
}

export class ClockBehindError extends ServerError {
  readonly code = 'CLOCK_BEHIND';
}

export class RestartRequiredError extends ServerError {
  readonly code = 'RESTART_REQUIRED';
}

/**
 * A membership change or leadership transfer refused: `status` is the HTTP
 * status the admin API answers with (400 a bad request, 409 not now or not
 * here, 503 not a Raft node, 504 it did not commit in time), `leader` the
 * leader's name when this node is not it.
 */
export class MembershipRefused extends ServerError {
  readonly code = 'MEMBERSHIP_REFUSED';
  readonly status: 400 | 409 | 503 | 504;
  readonly leader: string | undefined;

  constructor(message: string, options: { cause?: unknown; status?: 400 | 409 | 503 | 504; leader?: string } = {}) {
    super(message, options);
    this.status = options.status ?? 409;
    this.leader = options.leader;
  }
}
