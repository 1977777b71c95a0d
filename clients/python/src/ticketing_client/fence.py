"""Fencing: check a token in the same transaction as the write it protects.

``fence_postgres(conn, key, token)`` / ``fence_sqlite(conn, key, token)``
reject a token that is not above the highest one the resource has seen for
``key``, and raise that high-water mark, in one race-free statement. So a
holder whose lease ran out while it was paused cannot overwrite the work of
the holder after it. Call it inside the transaction of the protected write,
before the write; on :class:`StaleTokenError` roll back.

The table is the one ``@ticketing/fence`` (TypeScript) uses, so services in
both languages can fence the same database. No driver is imported here: pass
your own psycopg 3 connection (``pip install ticketing-client[postgres]``) or
``sqlite3`` connection.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ._wire import MAX_TOKEN

POSTGRES_MIGRATION = """
CREATE TABLE IF NOT EXISTS ticketing_fence (
  key        TEXT PRIMARY KEY,
  token      NUMERIC(20, 0) NOT NULL CHECK (token BETWEEN 1 AND 18446744073709551615),
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
)
"""
"""Tokens are unsigned 64-bit: NUMERIC(20,0) holds them exactly (BIGINT stops at 2^63-1)."""

SQLITE_MIGRATION = """
CREATE TABLE IF NOT EXISTS ticketing_fence (
  key        TEXT PRIMARY KEY,
  token      TEXT NOT NULL CHECK (length(token) = 20 AND token NOT GLOB '*[^0-9]*'),
  updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
)
"""
"""Tokens as 20-digit zero-padded text, so text order is numeric order (SQLite integers stop at 2^63-1)."""

_PG_FENCE = """
INSERT INTO ticketing_fence AS f (key, token) VALUES (%s, %s::numeric)
ON CONFLICT (key) DO UPDATE SET token = excluded.token, updated_at = now()
  WHERE excluded.token > f.token OR (%s AND excluded.token = f.token)
RETURNING f.token::text
"""

_SQLITE_FENCE = """
INSERT INTO ticketing_fence (key, token) VALUES (?, ?)
ON CONFLICT (key) DO UPDATE SET token = excluded.token, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
  WHERE excluded.token > ticketing_fence.token OR (? AND excluded.token = ticketing_fence.token)
"""


class StaleTokenError(Exception):
    """The token is not above the high-water mark of its key: a newer holder has written. Roll back."""

    code = "STALE_TOKEN"

    def __init__(self, key: str, token: int, high_water: int) -> None:
        super().__init__(f"stale fencing token for {key}: {token} is not above {high_water}; a newer lock holder has written")
        self.key = key
        self.token = token
        self.high_water = high_water


def _check(key: object, token: object) -> int:
    if not isinstance(key, str) or key == "":
        raise TypeError("fence: key must be a non-empty string")
    if isinstance(token, str) and token.isdigit() and not token.startswith("0"):
        token = int(token)
    if isinstance(token, bool) or not isinstance(token, int):
        raise TypeError(f"fence: token must be an int (ticket.token) or a decimal string, got {token!r}")
    if not 1 <= token <= MAX_TOKEN:
        raise ValueError(f"fence: token must be 1..{MAX_TOKEN}, got {token}")
    return token


def migrate_postgres(conn: Any) -> None:
    """PostgreSQL (psycopg 3 connection): creates the table if it does not exist."""
    conn.execute(POSTGRES_MIGRATION)


def _pg_in_transaction_or_implicit(conn: Any) -> None:
    status = getattr(getattr(conn, "info", None), "transaction_status", None)
    idle = status is not None and getattr(status, "name", "") == "IDLE"
    if idle and getattr(conn, "autocommit", False):
        raise RuntimeError(
            "fence_postgres must run inside the transaction of the write it protects (with conn.transaction(): ...)"
        )


def fence_postgres(conn: Any, key: str, token: int, *, allow_same_token: bool = False) -> None:
    """PostgreSQL (psycopg 3): call inside the transaction of the protected write, before it.

    Returns when ``token`` may write; raises :class:`StaleTokenError` otherwise (roll back then).
    Concurrent callers for one key queue on its row lock, so the check and the raise are one atomic
    step. Under REPEATABLE READ or SERIALIZABLE a conflicting caller gets a serialization failure
    instead. ``allow_same_token`` lets one grant make several fenced writes.
    """
    t = _check(key, token)
    _pg_in_transaction_or_implicit(conn)
    row = conn.execute(_PG_FENCE, (key, str(t), allow_same_token)).fetchone()
    if row is not None:
        return
    current = conn.execute("SELECT token::text FROM ticketing_fence WHERE key = %s", (key,)).fetchone()
    raise StaleTokenError(key, t, int(current[0]))


async def fence_postgres_async(conn: Any, key: str, token: int, *, allow_same_token: bool = False) -> None:
    """``fence_postgres`` for a psycopg 3 ``AsyncConnection``."""
    t = _check(key, token)
    _pg_in_transaction_or_implicit(conn)
    cur = await conn.execute(_PG_FENCE, (key, str(t), allow_same_token))
    if await cur.fetchone() is not None:
        return
    cur = await conn.execute("SELECT token::text FROM ticketing_fence WHERE key = %s", (key,))
    current = await cur.fetchone()
    raise StaleTokenError(key, t, int(current[0]))


def migrate_sqlite(conn: sqlite3.Connection) -> None:
    """SQLite: creates the table if it does not exist."""
    conn.execute(SQLITE_MIGRATION)


def fence_sqlite(conn: sqlite3.Connection, key: str, token: int, *, allow_same_token: bool = False) -> None:
    """SQLite (``sqlite3``): call inside the transaction of the protected write, before it.

    With the default ``isolation_level`` the statement opens that transaction itself; in autocommit
    mode you must ``BEGIN`` first. Raises :class:`StaleTokenError` (roll back then).
    """
    t = _check(key, token)
    autocommit = conn.isolation_level is None or getattr(conn, "autocommit", -1) is True
    if autocommit and not conn.in_transaction:
        raise RuntimeError("fence_sqlite must run inside the transaction of the write it protects (BEGIN first)")
    cur = conn.execute(_SQLITE_FENCE, (key, str(t).zfill(20), 1 if allow_same_token else 0))
    if cur.rowcount == 1:
        return
    row = conn.execute("SELECT token FROM ticketing_fence WHERE key = ?", (key,)).fetchone()
    raise StaleTokenError(key, t, int(row[0]))
