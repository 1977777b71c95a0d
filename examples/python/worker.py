#!/usr/bin/env python3
"""One order-service worker: charges every order it can lock, fenced by the token.

Run two of them against one server and one database (run_two_workers.py does)
and every order is charged exactly once. The lock makes the workers take turns;
the fencing token, checked in the same transaction as the charge, makes a
worker whose lease ran out (``--stall-on``: a pause past its lease) harmless:
its late charge is rejected and rolled back.

    python3 worker.py --db orders.sqlite --name worker-1 --run demo [--stall-on order-1 --lease 2]
    TICKETING_ADDR=host:port points at the server (default 127.0.0.1:5225)
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import time

from ticketing_client import LockTimeoutError, TicketBroker
from ticketing_client.fence import StaleTokenError, fence_sqlite

ORDERS = ["order-1", "order-2", "order-3"]


def charge(db: sqlite3.Connection, worker: str, order: str, key: str, token: int) -> None:
    """The protected write: fence, then charge, in one transaction (a stale token rolls it all back)."""
    with db:  # BEGIN ... COMMIT, or ROLLBACK on an exception
        fence_sqlite(db, key, token)
        db.execute("INSERT INTO payments (order_id, worker, token) VALUES (?, ?, ?)", (order, worker, str(token)))
        db.execute("UPDATE orders SET status = 'charged' WHERE id = ?", (order,))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--db", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--run", required=True, help="a fresh key namespace for this run")
    p.add_argument("--stall-on", default=None, help="pause past the lease while holding this order")
    p.add_argument("--lease", type=float, default=15.0)
    args = p.parse_args()

    db = sqlite3.connect(args.db, timeout=10)
    name = args.name
    # One broker per process, shared by all its threads; it reports background failures here.
    with TicketBroker(os.environ.get("TICKETING_ADDR", "127.0.0.1:5225"), on_error=lambda e: print(f"{name}: {e}", flush=True)) as broker:
        broker.wait_ready(5)
        for order in ORDERS:
            key = f"orders/{args.run}/{order}"
            try:
                # The lease is counted from when the acquire was sent, so time waiting in the
                # queue counts against it: min_work refuses a ticket with too little left.
                with broker.acquire(key, wait=10, lease=args.lease, min_work=0.5) as ticket:
                    (status,) = db.execute("SELECT status FROM orders WHERE id = ?", (order,)).fetchone()
                    if order == args.stall_on:
                        print(f"{name}: holds {order} with token {ticket.token}, then stalls past its lease", flush=True)
                        time.sleep(args.lease + 0.5)
                    elif status == "charged":
                        print(f"{name}: {order} is already charged", flush=True)
                        continue
                    charge(db, name, order, key, ticket.token)
                    print(f"{name}: charged {order} with token {ticket.token}", flush=True)
            except StaleTokenError as err:
                print(f"{name}: rejected on {order}: {err}", flush=True)
            except LockTimeoutError:
                print(f"{name}: {order} stayed busy", flush=True)


if __name__ == "__main__":
    main()
