/**
 * @ticketing/fence against a real PostgreSQL and SQLite, including the race
 * it exists for: a holder whose lease ran out while it was paused writes
 * after the next holder, and is rejected.
 */
import { readFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TicketBroker } from '../../packages/client/src/index.js';
import {
  POSTGRES_MIGRATION,
  SQLITE_MIGRATION,
  StaleTokenError,
  fence,
  fenceSync,
  migrate,
  migrateSync,
} from '../../packages/fence/src/index.js';
import { type RunningServer, startServer } from '@ticketing/test-support';
import { startPostgres, type Postgres } from './helpers/postgres.js';

const MAX = 18446744073709551615n;
const ABOVE_I64 = 9223372036854775809n; // 2^63 + 1: a signed BIGINT would overflow

let postgres: Postgres;
let db: pg.Client;
let server: RunningServer;
let broker: TicketBroker;
let seq = 0;
const key = () => `orders/${process.pid}-${++seq}`;

beforeAll(async () => {
  [postgres, server] = await Promise.all([startPostgres(), startServer()]);
  db = await postgres.client();
  await migrate(db);
  await migrate(db); // idempotent
  await db.query('CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL, token NUMERIC(20,0))');
  broker = TicketBroker.connect(server.address);
  await broker.waitReady(5_000);
}, 60_000);
afterAll(async () => {
  await broker?.close();
  await db?.end();
  await postgres?.stop();
  await server?.stop();
});

/** Runs `fn` in a transaction on `client`: COMMIT if it resolves, ROLLBACK if it throws. */
async function tx<T>(client: pg.Client, fn: () => Promise<T>): Promise<T> {
  await client.query('BEGIN');
  try {
    const result = await fn();
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK');
    throw err;
  }
}

async function highWater(k: string): Promise<string | undefined> {
  const { rows } = await db.query<{ token: string }>('SELECT token::text AS token FROM ticketing_fence WHERE key = $1', [k]);
  return rows[0]?.token;
}

describe('migrations', () => {
  it('exports the SQL files as they are', () => {
    expect(POSTGRES_MIGRATION).toBe(readFileSync(new URL('../../packages/fence/sql/postgres.sql', import.meta.url), 'utf8'));
    expect(SQLITE_MIGRATION).toBe(readFileSync(new URL('../../packages/fence/sql/sqlite.sql', import.meta.url), 'utf8'));
  });
});

describe('PostgreSQL', () => {
  it('accepts increasing tokens and rejects a token at or below the high-water mark', async () => {
    const k = key();
    await tx(db, async () => fence(db, k, 5n));
    await expect(tx(db, async () => fence(db, k, 5n))).rejects.toBeInstanceOf(StaleTokenError);
    const err = await tx(db, async () => fence(db, k, 4n)).catch((e: unknown) => e as StaleTokenError);
    expect(err).toMatchObject({ code: 'STALE_TOKEN', key: k, token: 4n, highWater: 5n });
    await tx(db, async () => fence(db, k, '6'));
    expect(await highWater(k)).toBe('6');
  });

  it('keeps u64 tokens exact above 2^63', async () => {
    const k = key();
    await tx(db, async () => fence(db, k, ABOVE_I64));
    await expect(tx(db, async () => fence(db, k, ABOVE_I64 - 1n))).rejects.toBeInstanceOf(StaleTokenError);
    await tx(db, async () => fence(db, k, MAX));
    expect(await highWater(k)).toBe(MAX.toString());
    await expect(fence(db, k, MAX + 1n)).rejects.toBeInstanceOf(RangeError);
    await expect(fence(db, k, 0n)).rejects.toBeInstanceOf(RangeError);
    await expect(fence(db, k, 1.5 as never)).rejects.toBeInstanceOf(TypeError);
  });

  it('does not raise the mark when the transaction rolls back', async () => {
    const k = key();
    await tx(db, async () => fence(db, k, 10n));
    await expect(
      tx(db, async () => {
        await fence(db, k, 11n);
        throw new Error('business write failed');
      }),
    ).rejects.toThrow('business write failed');
    expect(await highWater(k)).toBe('10');
    await tx(db, async () => fence(db, k, 11n));
  });

  it('refuses autocommit (a pg.Pool, or a client outside BEGIN): the mark would outlive a rolled-back write (issue 28 defect 5)', async () => {
    const k = key();
    const pool = new pg.Pool({ host: '127.0.0.1', port: postgres.port, user: 'test', database: 'postgres', max: 2 });
    try {
      await expect(fence(pool, k, 10n)).rejects.toThrow(/inside the transaction/);
      await expect(fence(db, k, 11n)).rejects.toThrow(/inside the transaction/);
      // A client wrapper without node-postgres' transaction status: the server is asked (SAVEPOINT).
      const wrapped = { query: async (text: string, values?: unknown[]) => db.query(text, values) };
      await expect(fence(wrapped, k, 12n)).rejects.toThrow(/inside the transaction/);
      await tx(db, async () => fence(wrapped, k, 4n));
      // Nothing was written by the refused calls: token 5 still passes after 4.
      await tx(db, async () => fence(db, k, 5n));
    } finally {
      await pool.end();
    }
  });

  it('lets one grant write twice with allowSameToken', async () => {
    const k = key();
    await tx(db, async () => fence(db, k, 7n, { allowSameToken: true }));
    await tx(db, async () => fence(db, k, 7n, { allowSameToken: true }));
    await expect(tx(db, async () => fence(db, k, 6n, { allowSameToken: true }))).rejects.toBeInstanceOf(StaleTokenError);
  });

  it('serialises concurrent transactions on one key: an older token waiting behind a newer one is rejected when it commits', async () => {
    const k = key();
    const other = await postgres.client();
    try {
      await db.query('BEGIN');
      await fence(db, k, 20n); // the newer holder, not committed yet
      await other.query('BEGIN');
      let settled = false;
      const older = fence(other, k, 19n).finally(() => (settled = true));
      await new Promise((r) => setTimeout(r, 200));
      expect(settled).toBe(false); // blocked on the row lock
      await db.query('COMMIT');
      await expect(older).rejects.toBeInstanceOf(StaleTokenError);
      await other.query('ROLLBACK');
      expect(await highWater(k)).toBe('20');
    } finally {
      await other.end();
    }
  });

  it('rejects a stale holder whose lease ran out, after the new holder wrote (the race it exists for)', async () => {
    const k = key();
    const order = k.replace('orders/', '');
    await db.query("INSERT INTO orders (id, status) VALUES ($1, 'new')", [order]);
    const stale = await broker.acquire(k, { waitMs: 0, leaseMs: 1_000 });
    // The first holder "pauses" (GC, a slow disk) past its lease...
    const fresh = await broker.acquire(k, { waitMs: 5_000, leaseMs: 30_000 });
    expect(stale.signal.aborted).toBe(true);
    expect(fresh.token).toBeGreaterThan(stale.token);
    // ...the next holder charges the order...
    await tx(db, async () => {
      await fence(db, k, fresh.token);
      await db.query("UPDATE orders SET status = 'charged by fresh', token = $2 WHERE id = $1", [order, fresh.token.toString()]);
    });
    // ...and the stale holder wakes up and tries to write: rejected, nothing changed.
    await expect(
      tx(db, async () => {
        await fence(db, k, stale.token);
        await db.query("UPDATE orders SET status = 'charged by stale', token = $2 WHERE id = $1", [order, stale.token.toString()]);
      }),
    ).rejects.toBeInstanceOf(StaleTokenError);
    const { rows } = await db.query<{ status: string; token: string }>('SELECT status, token::text AS token FROM orders WHERE id = $1', [order]);
    expect(rows[0]).toEqual({ status: 'charged by fresh', token: fresh.token.toString() });
    expect(await stale.release()).toBe('not-held');
    await fresh.release();
  });
});

describe('SQLite', () => {
  const sqlite = new Database(':memory:');
  migrateSync(sqlite);
  migrateSync(sqlite);
  sqlite.exec('CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL, token TEXT)');
  const write = (k: string, token: bigint | string, status = 'written') =>
    sqlite.transaction(() => {
      fenceSync(sqlite, k, token);
      sqlite.prepare('INSERT INTO orders (id, status, token) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET status = excluded.status, token = excluded.token').run(k, status, String(token));
    })();
  const mark = (k: string) => (sqlite.prepare('SELECT token FROM ticketing_fence WHERE key = ?').get(k) as { token: string } | undefined)?.token;

  it('accepts increasing tokens and rejects a token at or below the mark, rolling the write back', () => {
    const k = key();
    write(k, 9n, 'nine');
    expect(() => write(k, 9n, 'nine again')).toThrow(StaleTokenError);
    expect(() => write(k, 8n, 'eight')).toThrow(StaleTokenError);
    // Numeric, not text, order: 10 > 9 although "10" < "9".
    write(k, 10n, 'ten');
    expect(sqlite.prepare('SELECT status FROM orders WHERE id = ?').get(k)).toEqual({ status: 'ten' });
  });

  it('keeps u64 tokens exact above 2^63', () => {
    const k = key();
    write(k, ABOVE_I64);
    expect(() => write(k, ABOVE_I64 - 1n)).toThrow(StaleTokenError);
    write(k, MAX);
    expect(BigInt(mark(k)!)).toBe(MAX);
  });

  it('refuses to run outside a transaction', () => {
    expect(() => fenceSync(sqlite, key(), 1n)).toThrow(/inside the transaction/);
  });

  it('rejects a stale holder whose lease ran out, after the new holder wrote', async () => {
    const k = key();
    const stale = await broker.acquire(k, { waitMs: 0, leaseMs: 1_000 });
    const fresh = await broker.acquire(k, { waitMs: 5_000, leaseMs: 30_000 });
    write(k, fresh.token, 'fresh');
    const err = (() => {
      try {
        write(k, stale.token, 'stale');
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(StaleTokenError);
    expect((err as StaleTokenError).highWater).toBe(fresh.token);
    expect(sqlite.prepare('SELECT status FROM orders WHERE id = ?').get(k)).toEqual({ status: 'fresh' });
    await fresh.release();
  });
});
