#!/usr/bin/env python3
"""Two worker processes against one server and one SQLite database; checks
that every order was charged exactly once (exit 1 otherwise).

    bin/ticketing server --memory &
    python3 examples/python/run_two_workers.py      # TICKETING_ADDR=host:port to point elsewhere
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ticketing_client.fence import migrate_sqlite

HERE = Path(__file__).resolve().parent


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="ticketing-orders-") as d:
        path = os.path.join(d, "orders.sqlite")
        db = sqlite3.connect(path)
        migrate_sqlite(db)
        db.executescript(
            """
            CREATE TABLE orders   (id TEXT PRIMARY KEY, amount_cents INTEGER NOT NULL, status TEXT NOT NULL DEFAULT 'new');
            CREATE TABLE payments (order_id TEXT NOT NULL, worker TEXT NOT NULL, token TEXT NOT NULL);
            INSERT INTO orders (id, amount_cents) VALUES ('order-1', 1999), ('order-2', 1999), ('order-3', 1999);
            """
        )
        db.commit()
        run = f"py-{int(time.time() * 1000):x}"
        worker = [sys.executable, str(HERE / "worker.py"), "--db", path, "--run", run]
        # worker-1 holds order-1 first and stalls past its 2 s lease; worker-2 starts a moment later.
        w1 = subprocess.Popen([*worker, "--name", "worker-1", "--stall-on", "order-1", "--lease", "2"])
        time.sleep(0.3)
        w2 = subprocess.Popen([*worker, "--name", "worker-2"])
        codes = [w1.wait(timeout=60), w2.wait(timeout=60)]
        if codes != [0, 0]:
            print(f"WRONG: workers exited with {codes}")
            return 1
        for row in db.execute("SELECT order_id, worker, token FROM payments ORDER BY order_id"):
            print(" | ".join(row))
        twice = db.execute("SELECT order_id FROM payments GROUP BY order_id HAVING count(*) > 1").fetchall()
        unpaid = db.execute("SELECT id FROM orders WHERE status <> 'charged'").fetchall()
        db.close()
        if twice or unpaid:
            print(f"WRONG: charged twice {twice}, not charged {unpaid}")
            return 1
        print("every order was charged exactly once")
        return 0


if __name__ == "__main__":
    sys.exit(main())
