/**
 * The lock table: the pure, deterministic state machine that replication
 * replicates (seed 001). It applies commands and returns their results; the
 * fencing token is assigned here, at apply time, so every replica applying
 * the same commands in the same order computes the same tokens.
 *
 * No clock, no I/O, no randomness. Lease *durations* are state (a restored
 * replica needs them; after an Extend, the extension's); lease *deadlines*
 * are not: each node tracks them on its own clock, and a lease ends only
 * when an Expire{key, token} is applied.
 */
import { LockRecord, type Command, type Result, type Token } from './commands.js';

/**
 * Makes the record of a lock the table starts to hold: a new grant, or one
 * restored from a snapshot (`remainingMs`: what a replication snapshot says
 * is left of its lease; otherwise the whole lease). The lock engine passes
 * one that makes a subclass carrying its lease deadline and timer links, so
 * a held lock costs one object, not two (memory per held key is a target),
 * and every table a node keeps (active, standby, follower) gets its deadlines
 * from the same place. The table never looks at the extra fields. An Extend
 * makes a new record for the same grant (`extending`: the one it replaces),
 * so its new deadline is set by the same code too.
 */
export type RecordFactory<R extends LockRecord> = (key: string, token: Token, leaseMs: number, remainingMs?: number, extending?: R) => R;

/** Records without deadlines: the table on its own (tests, models). */
export const plainRecord: RecordFactory<LockRecord> = (key, token, leaseMs) => new LockRecord(key, token, leaseMs);

export interface LockTableSnapshot {
  /** The next token to assign, as a decimal string (JSON has no u64). */
  readonly nextToken: string;
  /** [key, token (decimal), leaseMs, owner (a named identity, when it has one)] per held lock. */
  readonly locks: ReadonlyArray<readonly [string, string, number, string?]>;
}

/**
 * A snapshot whose locks may also say how much of their lease is left
 * ([key, token, leaseMs, remainingMs, owner]), or a LockTableSnapshot.
 */
export interface RestorableSnapshot {
  readonly nextToken: string;
  readonly locks: ReadonlyArray<readonly [string, string, number, (number | string)?, string?]>;
}

export const MAX_TOKEN = 18446744073709551615n;

/** The results that carry no record, shared (apply runs on every request). */
type Plain = Exclude<Result, { type: 'granted' | 'extended' }>;
const RESULT_GRANT_REJECTED: Plain = { type: 'grant-rejected' };
const RESULT_RELEASED: Plain = { type: 'released' };
const RESULT_NOT_FOUND: Plain = { type: 'not-found' };
const RESULT_EXPIRED: Plain = { type: 'expired', existed: true };
const RESULT_NOT_EXPIRED: Plain = { type: 'expired', existed: false };
const RESULT_NOT_EXTENDED: Plain = { type: 'not-extended' };
const RESULT_NOOP: Plain = { type: 'noop' };

export class LockTable<R extends LockRecord = LockRecord> {
  private readonly locks = new Map<string, R>();
  private next: Token;

  constructor(
    firstToken: Token,
    private readonly makeRecord: RecordFactory<R>,
  ) {
    this.next = firstToken;
  }

  /** The token the next Grant will receive. */
  get nextToken(): Token {
    return this.next;
  }

  /** Number of held locks. */
  get size(): number {
    return this.locks.size;
  }

  get(key: string): R | undefined {
    return this.locks.get(key);
  }

  records(): IterableIterator<R> {
    return this.locks.values();
  }

  apply(command: Command): Result<R> {
    switch (command.type) {
      case 'grant': {
        if (this.locks.has(command.key)) return RESULT_GRANT_REJECTED;
        // Exhausting 2^64 tokens is not a practical concern, but the rule
        // "never repeat a token" outranks availability if it ever happens.
        if (this.next > MAX_TOKEN) return RESULT_GRANT_REJECTED;
        const token = this.next++;
        const record = this.makeRecord(command.key, token, command.leaseMs);
        if (command.owner !== undefined) record.owner = command.owner;
        this.locks.set(command.key, record);
        return { type: 'granted', token, record };
      }
      case 'release': {
        const record = this.locks.get(command.key);
        if (record === undefined || record.token !== command.token) return RESULT_NOT_FOUND;
        this.locks.delete(command.key);
        return RESULT_RELEASED;
      }
      case 'expire': {
        const record = this.locks.get(command.key);
        if (record === undefined || record.token !== command.token) return RESULT_NOT_EXPIRED;
        this.locks.delete(command.key);
        return RESULT_EXPIRED;
      }
      case 'extend': {
        const previous = this.locks.get(command.key);
        if (previous === undefined || previous.token !== command.token) return RESULT_NOT_EXTENDED;
        const record = this.makeRecord(command.key, previous.token, command.leaseMs, undefined, previous);
        record.owner = previous.owner;
        this.locks.set(command.key, record);
        return { type: 'extended', record, previous };
      }
      case 'token-floor': {
        if (command.atLeast > this.next) this.next = command.atLeast;
        return RESULT_NOOP;
      }
      case 'noop':
        return RESULT_NOOP;
    }
  }

  snapshot(): LockTableSnapshot {
    const locks: Array<readonly [string, string, number, string?]> = [];
    for (const r of this.locks.values()) locks.push(r.owner === undefined ? [r.key, r.token.toString(), r.leaseMs] : [r.key, r.token.toString(), r.leaseMs, r.owner]);
    return { nextToken: this.next.toString(), locks };
  }

  /** A table holding `snapshot`'s locks; a lock may carry what is left of its lease (a replication snapshot). */
  static restore<R extends LockRecord>(snapshot: RestorableSnapshot, makeRecord: RecordFactory<R>): LockTable<R> {
    const table = new LockTable(BigInt(snapshot.nextToken), makeRecord);
    for (const [key, token, leaseMs, remainingOrOwner, ownerAfter] of snapshot.locks) {
      const remainingMs = typeof remainingOrOwner === 'number' ? remainingOrOwner : undefined;
      const record = makeRecord(key, BigInt(token), leaseMs, remainingMs);
      const owner = typeof remainingOrOwner === 'string' ? remainingOrOwner : ownerAfter;
      if (owner !== undefined) record.owner = owner;
      table.locks.set(key, record);
    }
    return table;
  }
}
