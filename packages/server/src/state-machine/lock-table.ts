/**
 * The lock table: the pure, deterministic state machine that replication
 * replicates (seed 001). It applies commands and returns their results; the
 * fencing token is assigned here, at apply time, so every replica applying
 * the same commands in the same order computes the same tokens.
 *
 * No clock, no I/O, no randomness. Lease *durations* are state (a restored
 * replica needs them); lease *deadlines* are not: each node tracks them on
 * its own clock, and a lease ends only when an Expire{key, token} is applied.
 */
import type { Command, Result, Token } from './commands.js';

/** One held lock. */
export class LockRecord {
  constructor(
    readonly key: string,
    readonly token: Token,
    readonly leaseMs: number,
  ) {}
}

/**
 * Makes the record of a new grant. The lock engine passes one that makes a
 * subclass carrying its lease timer, so a held lock costs one object, not two
 * (memory per held key is a target); the table never looks at the extra fields.
 */
export type RecordFactory = (key: string, token: Token, leaseMs: number) => LockRecord;

const plainRecord: RecordFactory = (key, token, leaseMs) => new LockRecord(key, token, leaseMs);

export interface LockTableSnapshot {
  /** The next token to assign, as a decimal string (JSON has no u64). */
  readonly nextToken: string;
  /** [key, token (decimal), leaseMs] per held lock. */
  readonly locks: ReadonlyArray<readonly [string, string, number]>;
}

export const MAX_TOKEN = 18446744073709551615n;

const RESULT_GRANT_REJECTED: Result = { type: 'grant-rejected' };
const RESULT_RELEASED: Result = { type: 'released' };
const RESULT_NOT_FOUND: Result = { type: 'not-found' };
const RESULT_EXPIRED: Result = { type: 'expired', existed: true };
const RESULT_NOT_EXPIRED: Result = { type: 'expired', existed: false };
const RESULT_NOOP: Result = { type: 'noop' };

export class LockTable {
  private readonly locks = new Map<string, LockRecord>();
  private next: Token;

  constructor(
    firstToken: Token = 1n,
    private readonly makeRecord: RecordFactory = plainRecord,
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

  get(key: string): LockRecord | undefined {
    return this.locks.get(key);
  }

  records(): IterableIterator<LockRecord> {
    return this.locks.values();
  }

  apply(command: Command): Result {
    switch (command.type) {
      case 'grant': {
        if (this.locks.has(command.key)) return RESULT_GRANT_REJECTED;
        // Exhausting 2^64 tokens is not a practical concern, but the rule
        // "never repeat a token" outranks availability if it ever happens.
        if (this.next > MAX_TOKEN) return RESULT_GRANT_REJECTED;
        const token = this.next++;
        const record = this.makeRecord(command.key, token, command.leaseMs);
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
      case 'token-floor': {
        if (command.atLeast > this.next) this.next = command.atLeast;
        return RESULT_NOOP;
      }
      case 'noop':
        return RESULT_NOOP;
    }
  }

  snapshot(): LockTableSnapshot {
    const locks: Array<readonly [string, string, number]> = [];
    for (const r of this.locks.values()) locks.push([r.key, r.token.toString(), r.leaseMs]);
    return { nextToken: this.next.toString(), locks };
  }

  static restore(snapshot: LockTableSnapshot, makeRecord: RecordFactory = plainRecord): LockTable {
    const table = new LockTable(BigInt(snapshot.nextToken), makeRecord);
    for (const [key, token, leaseMs] of snapshot.locks) {
      table.locks.set(key, makeRecord(key, BigInt(token), leaseMs));
    }
    return table;
  }
}
