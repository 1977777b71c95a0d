"""The fencing helpers against a real PostgreSQL (psycopg 3) and SQLite (sqlite3).

PostgreSQL is a throw-away cluster started like test/fence/helpers/postgres.ts
(initdb in a temp dir, loopback port, as the postgres OS user when root). It
fails loudly when it cannot start: these tests are never skipped.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ticketing_client.fence import (
    StaleTokenError,
    fence_postgres,
    fence_postgres_async,
    fence_sqlite,
    migrate_postgres,
    migrate_sqlite,
)

from servers import free_port_pair

BIG = 2**64 - 1


def _bin_dir() -> Path:
    root = Path("/usr/lib/postgresql")
    versions = sorted((p for p in root.glob("*") if (p / "bin" / "postgres").exists()), key=lambda p: int(p.name), reverse=True)
    if not versions:
        raise RuntimeError("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres): run scripts/install-test-deps.sh")
    return versions[0] / "bin"


def _as_db_user(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.getuid() == 0 else args


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    bin_dir = _bin_dir()
    d = tempfile.mkdtemp(prefix="ticketing-py-pg-")
    if os.getuid() == 0:
        shutil.chown(d, "postgres", "postgres")
    os.chmod(d, 0o700)
    data = os.path.join(d, "data")
    subprocess.run(_as_db_user([str(bin_dir / "initdb"), "-D", data, "-U", "test", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale", "C"]), check=True, capture_output=True)
    port = free_port_pair()
    proc = subprocess.Popen(
        _as_db_user([str(bin_dir / "postgres"), "-D", data, "-p", str(port), "-k", d, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    dsn = f"host=127.0.0.1 port={port} user=test dbname=postgres"
    deadline = time.monotonic() + 20
    while True:
        try:
            psycopg.connect(dsn).close()
            break
        except psycopg.OperationalError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"PostgreSQL did not start: {proc.stderr.read() if proc.stderr else ''!r}")
            time.sleep(0.1)
    with psycopg.connect(dsn, autocommit=True) as c:
        migrate_postgres(c)
    try:
        yield dsn
    finally:
        subprocess.run(_as_db_user([str(bin_dir / "pg_ctl"), "stop", "-D", data, "-m", "immediate", "-w", "-t", "20"]), capture_output=True)
        proc.wait(timeout=20)
        shutil.rmtree(d, ignore_errors=True)


def test_postgres_accepts_increasing_tokens_and_rejects_stale_ones(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        with conn.transaction():
            fence_postgres(conn, "pg/a", 10)
        with conn.transaction():
            fence_postgres(conn, "pg/a", BIG)  # u64 kept exactly
        with pytest.raises(StaleTokenError) as info:
            with conn.transaction():
                fence_postgres(conn, "pg/a", BIG - 1)
        assert info.value.high_water == BIG and info.value.code == "STALE_TOKEN"
        with pytest.raises(StaleTokenError):
            with conn.transaction():
                fence_postgres(conn, "pg/a", BIG)  # the same token fences one transaction
        with conn.transaction():
            fence_postgres(conn, "pg/a", BIG, allow_same_token=True)
        with pytest.raises(ValueError):
            fence_postgres(conn, "pg/a", 0)


def test_postgres_rolls_back_with_the_business_write(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS charges (order_id TEXT, token NUMERIC)")
        conn.commit()
        with pytest.raises(RuntimeError):
            with conn.transaction():
                fence_postgres(conn, "pg/rb", 5)
                conn.execute("INSERT INTO charges VALUES ('rb', 5)")
                raise RuntimeError("business failure")
        # The high-water mark rolled back with it: token 5 may still write.
        with conn.transaction():
            fence_postgres(conn, "pg/rb", 5)


def test_postgres_autocommit_outside_a_transaction_is_refused(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        with pytest.raises(RuntimeError, match="inside the transaction"):
            fence_postgres(conn, "pg/ac", 1)


def test_postgres_concurrent_writers_one_wins(pg_dsn: str) -> None:
    """A paused old holder (token 1) and the new holder (token 2) race: the old one never writes after."""
    results: dict[int, Any] = {}
    barrier = threading.Barrier(2)

    def writer(token: int, delay: float) -> None:
        with psycopg.connect(pg_dsn) as conn:
            barrier.wait()
            time.sleep(delay)
            try:
                with conn.transaction():
                    fence_postgres(conn, "pg/race", token)
                    time.sleep(0.2)  # holds the row lock: the other queues behind it
                results[token] = "ok"
            except StaleTokenError as err:
                results[token] = err

    threads = [threading.Thread(target=writer, args=(2, 0.0)), threading.Thread(target=writer, args=(1, 0.05))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results[2] == "ok" and isinstance(results[1], StaleTokenError)


def test_postgres_async(pg_dsn: str) -> None:
    import asyncio

    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
            async with conn.transaction():
                await fence_postgres_async(conn, "pg/async", 3)
            with pytest.raises(StaleTokenError):
                async with conn.transaction():
                    await fence_postgres_async(conn, "pg/async", 2)

    asyncio.run(main())


@pytest.fixture
def sqlite_db() -> Iterator[sqlite3.Connection]:
    d = tempfile.mkdtemp(prefix="ticketing-py-sqlite-")
    conn = sqlite3.connect(os.path.join(d, "db.sqlite"))
    migrate_sqlite(conn)
    conn.commit()
    yield conn
    conn.close()
    shutil.rmtree(d, ignore_errors=True)


def test_sqlite_accepts_increasing_tokens_and_rejects_stale_ones(sqlite_db: sqlite3.Connection) -> None:
    with sqlite_db:  # commits, or rolls back on an exception
        fence_sqlite(sqlite_db, "sq/a", 9)
    with sqlite_db:
        fence_sqlite(sqlite_db, "sq/a", 10)  # 10 > 9 numerically although "10" < "9" as text
    with sqlite_db:
        fence_sqlite(sqlite_db, "sq/a", BIG)
    with pytest.raises(StaleTokenError) as info:
        with sqlite_db:
            fence_sqlite(sqlite_db, "sq/a", BIG - 1)
    assert info.value.high_water == BIG
    with pytest.raises(StaleTokenError):
        with sqlite_db:
            fence_sqlite(sqlite_db, "sq/a", BIG)
    with sqlite_db:
        fence_sqlite(sqlite_db, "sq/a", BIG, allow_same_token=True)


def test_sqlite_rolls_back_with_the_business_write(sqlite_db: sqlite3.Connection) -> None:
    sqlite_db.execute("CREATE TABLE charges (order_id TEXT)")
    with pytest.raises(RuntimeError):
        with sqlite_db:
            fence_sqlite(sqlite_db, "sq/rb", 5)
            sqlite_db.execute("INSERT INTO charges VALUES ('x')")
            raise RuntimeError("business failure")
    assert sqlite_db.execute("SELECT count(*) FROM charges").fetchone()[0] == 0
    with sqlite_db:
        fence_sqlite(sqlite_db, "sq/rb", 5)


def test_sqlite_autocommit_needs_begin(sqlite_db: sqlite3.Connection) -> None:
    sqlite_db.isolation_level = None
    with pytest.raises(RuntimeError, match="inside the transaction"):
        fence_sqlite(sqlite_db, "sq/ac", 1)
    sqlite_db.execute("BEGIN")
    fence_sqlite(sqlite_db, "sq/ac", 1)
    sqlite_db.execute("COMMIT")
