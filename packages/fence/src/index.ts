/**
 * @ticketing/fence: check a fencing token in the same transaction as the
 * write it protects. `fence(tx, key, token)` rejects a token that is not
 * above the highest one the resource has seen for `key`, and raises that
 * high-water mark, in one race-free statement. So a holder whose lease ran
 * out while it was paused cannot overwrite the work of the holder after it.
 *
 * No runtime dependencies: pass your own `pg` client (inside BEGIN ... COMMIT)
 * or `better-sqlite3` database (inside `db.transaction(...)`).
 */
import { readFileSync } from 'node:fs';

const MAX_TOKEN = 18446744073709551615n;

/** The migration for PostgreSQL (also in `@ticketing/fence/sql/postgres.sql`). */
export const POSTGRES_MIGRATION = readFileSync(new URL('../sql/postgres.sql', import.meta.url), 'utf8');
/** The migration for SQLite (also in `@ticketing/fence/sql/sqlite.sql`). */
export const SQLITE_MIGRATION = readFileSync(new URL('../sql/sqlite.sql', import.meta.url), 'utf8');

/** The token is not above the high-water mark of its key: a newer holder has written. Roll back. */
export class StaleTokenError extends Error {
  readonly code = 'STALE_TOKEN';

  constructor(
    readonly key: string,
    readonly token: bigint,
    readonly highWater: bigint,
  ) {
    super(`stale fencing token for ${key}: ${token} is not above ${highWater}; a newer lock holder has written`);
    this.name = 'StaleTokenError';
  }
}

export interface FenceOptions {
  /**
   * Accept the token equal to the high-water mark, so one grant can make
   * several fenced writes (tokens are unique per grant). Default false: a
   * token fences exactly one transaction.
   */
  readonly allowSameToken?: boolean;
}

/** What `fence` needs from a `pg` Client or PoolClient. */
export interface PgQueryable {
  query(text: string, values?: unknown[]): Promise<{ rows: Array<Record<string, unknown>> }>;
}

/** What `fenceSync` needs from a `better-sqlite3` Database. */
export interface SqliteDatabase {
  readonly inTransaction: boolean;
  prepare(sql: string): { get(...params: unknown[]): unknown };
  exec(sql: string): unknown;
}

function checkArgs(key: unknown, token: unknown): bigint {
  if (typeof key !== 'string' || key === '') throw new TypeError('fence: key must be a non-empty string');
  let t: bigint;
  if (typeof token === 'bigint') t = token;
  else if (typeof token === 'string' && /^[1-9][0-9]{0,19}$/.test(token)) t = BigInt(token);
  else throw new TypeError(`fence: token must be a bigint (ticket.token) or a decimal string, got ${String(token)}`);
  if (t < 1n || t > MAX_TOKEN) throw new RangeError(`fence: token must be 1..${MAX_TOKEN}, got ${t}`);
  return t;
}

const PG_FENCE = `
INSERT INTO ticketing_fence AS f (key, token) VALUES ($1, $2::numeric)
ON CONFLICT (key) DO UPDATE SET token = excluded.token, updated_at = now()
  WHERE excluded.token > f.token OR ($3 AND excluded.token = f.token)
RETURNING f.token::text AS token`;

const OUTSIDE_TX =
  'fence must run inside the transaction of the write it protects (BEGIN first, on one client: ' +
  'a pg.Pool runs each query in a transaction of its own, so the mark would stay raised after the write rolled back)';

/**
 * Throws unless `client` is inside a transaction block. node-postgres keeps the server's
 * transaction status of its last ReadyForQuery (`'I'` idle, `'T'` in a block, `'E'` failed); where
 * that is not there, the server decides: SAVEPOINT is refused outside a block (SQLSTATE 25P01).
 */
async function requireTransaction(client: PgQueryable): Promise<void> {
  if (isPool(client)) throw new Error(OUTSIDE_TX);
  const status = (client as { _txStatus?: unknown })._txStatus;
  if (status === 'T' || status === 'E') return; // 'E': the next statement fails with the server's own error
  if (status === 'I') throw new Error(OUTSIDE_TX);
  try {
    await client.query('SAVEPOINT ticketing_fence_check');
  } catch (err) {
    if ((err as { code?: unknown }).code === '25P01') throw new Error(OUTSIDE_TX, { cause: err });
    throw err;
  }
  await client.query('RELEASE SAVEPOINT ticketing_fence_check');
}

/** A `pg.Pool` (or anything pool-like): each query on it would be its own transaction. */
function isPool(client: object): boolean {
  return typeof (client as { connect?: unknown }).connect === 'function' && 'totalCount' in client && 'idleCount' in client;
}

/**
 * PostgreSQL: call inside the transaction of the protected write, before it,
 * on the client that runs that transaction (from `pool.connect()`, after
 * `BEGIN`). Resolves when `token` may write; rejects with `StaleTokenError`
 * otherwise (roll back then). Concurrent callers for one key queue on its row
 * lock, so the check and the raise are one atomic step. Under REPEATABLE READ
 * or SERIALIZABLE a conflicting caller gets a serialization failure instead.
 * Outside a transaction (autocommit, a `pg.Pool`) it throws and writes
 * nothing: the raised mark would outlive a write that rolls back.
 */
export async function fence(client: PgQueryable, key: string, token: bigint | string, options: FenceOptions = {}): Promise<void> {
  const t = checkArgs(key, token);
  await requireTransaction(client);
  const { rows } = await client.query(PG_FENCE, [key, t.toString(), options.allowSameToken === true]);
  if (rows.length > 0) return;
  const current = await client.query('SELECT token::text AS token FROM ticketing_fence WHERE key = $1', [key]);
  throw new StaleTokenError(key, t, BigInt(current.rows[0]!.token as string));
}

/** PostgreSQL: creates the table if it does not exist. */
export async function migrate(client: PgQueryable): Promise<void> {
  await client.query(POSTGRES_MIGRATION);
}

const pad = (t: bigint): string => t.toString().padStart(20, '0');

const SQLITE_FENCE = `
INSERT INTO ticketing_fence (key, token) VALUES (?, ?)
ON CONFLICT (key) DO UPDATE SET token = excluded.token, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
  WHERE excluded.token > ticketing_fence.token OR (? AND excluded.token = ticketing_fence.token)
RETURNING token`;

/**
 * SQLite (better-sqlite3, synchronous): call inside `db.transaction(...)`
 * before the protected write. Throws `StaleTokenError` (which rolls the
 * transaction back when thrown out of it).
 */
export function fenceSync(db: SqliteDatabase, key: string, token: bigint | string, options: FenceOptions = {}): void {
  const t = checkArgs(key, token);
  if (!db.inTransaction) throw new Error('fenceSync must run inside the transaction of the write it protects (db.transaction(...))');
  const row = db.prepare(SQLITE_FENCE).get(key, pad(t), options.allowSameToken === true ? 1 : 0);
  if (row !== undefined) return;
  const current = db.prepare('SELECT token FROM ticketing_fence WHERE key = ?').get(key) as { token: string };
  throw new StaleTokenError(key, t, BigInt(current.token));
}

/** SQLite: creates the table if it does not exist. */
export function migrateSync(db: SqliteDatabase): void {
  db.exec(SQLITE_MIGRATION);
}
