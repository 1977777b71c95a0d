#!/usr/bin/env python3
"""Pairs/s (acquire + release of a fresh key) through the Python client, against the raw generators.

Starts its own ``bin/ticketing server --memory`` on a free port, then runs, one after another:

- ``node-raw``: the project's raw load generator (packages/bench/dist/loadgen.js), 2 conns x 25 in flight;
- ``py-raw``: a minimal pipelined asyncio generator in Python, 2 conns x 25 in flight (the
  language's floor: bytes and line matching only, none of the client's rules);
- ``asyncio``: ``AsyncTicketBroker``, 50 concurrent tasks, default pool (two connections);
- ``threads``: ``TicketBroker`` (blocking face), 50 threads, default pool.

    python3 clients/python/bench/bench.py [--duration 3] [--warmup 1]   (or: npm run bench:python)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "clients" / "python" / "src"))

from ticketing_client import AsyncTicketBroker, TicketBroker  # noqa: E402


def start_server() -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        ["node", str(REPO / "bin" / "ticketing"), "server", "--listen", "127.0.0.1:0", "--memory"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"listen=\S+:(\d+)", line)
    if m is None:
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return proc, int(m.group(1))


def node_raw(port: int, warmup: float, duration: float) -> float:
    spec = {"workload": "pairs", "target": "ticketing", "host": "127.0.0.1", "port": port, "conns": 2, "inflight": 25,
            "warmupMs": int(warmup * 1000), "durationMs": int(duration * 1000)}
    out = subprocess.run(["node", str(REPO / "packages" / "bench" / "dist" / "loadgen.js"), json.dumps(spec)],
                         capture_output=True, text=True, check=True)
    return float(json.loads(out.stdout.strip().splitlines()[-1])["opsPerSec"])


async def py_raw(port: int, warmup: float, duration: float) -> float:
    """Each connection keeps 25 pairs in flight: A on a fresh key, R with the granted token."""
    count = [0]
    measuring = [False]
    stop = [False]

    async def conn(ci: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        seq = 0

        def acquire() -> None:
            nonlocal seq
            seq += 1
            writer.write(f"A b{ci}-{seq} 0 30\n".encode())

        for _ in range(25):
            acquire()
        while not stop[0]:
            line = await reader.readline()
            op, _, rest = line.decode().rstrip("\n").partition(" ")
            if op == "A":
                token, key = rest.split(" ")
                writer.write(f"R {key} {token}\n".encode())
            elif op == "R":
                if measuring[0]:
                    count[0] += 1
                acquire()
        writer.close()

    tasks = [asyncio.ensure_future(conn(i)) for i in range(2)]
    await asyncio.sleep(warmup)
    measuring[0] = True
    await asyncio.sleep(duration)
    measuring[0] = False
    n = count[0]
    stop[0] = True
    await asyncio.wait(tasks, timeout=2)
    return n / duration


async def py_async(address: str, warmup: float, duration: float, callers: int = 50) -> float:
    count = [0]
    measuring = [False]
    stop = [False]
    async with AsyncTicketBroker(address) as broker:
        await broker.wait_ready(5)

        async def caller(ci: int) -> None:
            seq = 0
            while not stop[0]:
                seq += 1
                ticket = await broker.acquire(f"c{ci}-{seq}", wait=0, lease=30)
                await ticket.release()
                if measuring[0]:
                    count[0] += 1

        tasks = [asyncio.ensure_future(caller(i)) for i in range(callers)]
        await asyncio.sleep(warmup)
        measuring[0] = True
        await asyncio.sleep(duration)
        measuring[0] = False
        n = count[0]
        stop[0] = True
        await asyncio.gather(*tasks)
    return n / duration


def py_threads(address: str, warmup: float, duration: float, callers: int = 50) -> float:
    count = [0]
    lock = threading.Lock()
    measuring = threading.Event()
    stop = threading.Event()
    with TicketBroker(address) as broker:
        broker.wait_ready(5)

        def caller(ci: int) -> None:
            seq = 0
            while not stop.is_set():
                seq += 1
                ticket = broker.acquire(f"t{ci}-{seq}", wait=0, lease=30)
                ticket.release()
                if measuring.is_set():
                    with lock:
                        count[0] += 1

        threads = [threading.Thread(target=caller, args=(i,)) for i in range(callers)]
        for t in threads:
            t.start()
        time.sleep(warmup)
        measuring.set()
        time.sleep(duration)
        measuring.clear()
        n = count[0]
        stop.set()
        for t in threads:
            t.join()
    return n / duration


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--duration", type=float, default=3.0)
    p.add_argument("--warmup", type=float, default=1.0)
    args = p.parse_args()
    proc, port = start_server()
    address = f"127.0.0.1:{port}"
    try:
        results = {
            "node-raw (2 conns x 25 in flight)": node_raw(port, args.warmup, args.duration),
            "py-raw asyncio (2 conns x 25 in flight)": asyncio.run(py_raw(port, args.warmup, args.duration)),
            "AsyncTicketBroker, 50 tasks": asyncio.run(py_async(address, args.warmup, args.duration)),
            "TicketBroker, 50 threads": py_threads(address, args.warmup, args.duration),
        }
    finally:
        proc.kill()
    base = results["py-raw asyncio (2 conns x 25 in flight)"]
    node = results["node-raw (2 conns x 25 in flight)"]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, {args.duration} s per run after {args.warmup} s warm-up")
    for name, v in results.items():
        print(f"{name:42s} {v:>10,.0f} pairs/s   {v / base:5.2f}x py-raw   {v / node:5.2f}x node-raw")


if __name__ == "__main__":
    main()
