"""Issue 28 defect 1 under a real SIGSTOP: a client process is stopped for longer than its
acquire's wait + 5 s while the grant reaches its socket. When it runs again it must read that
grant (a ticket with the lease that is left, released afterwards), not call it INDETERMINATE and
leave the key held by nobody for the whole lease."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from servers import Server


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server([])
    yield s
    s.kill()


def ask(address: str, line: str) -> str:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(line.encode() + b"\n")
        return s.makefile().readline().strip()


def test_a_grant_that_arrived_during_sigstop_is_kept_and_released(server: Server) -> None:
    key = f"paused-{os.getpid()}"
    host, port = server.address.rsplit(":", 1)
    child = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("pause_child.py"))],
        env={**os.environ, "TICKETING_ADDR": server.address, "TICKETING_KEY": key},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: list[dict[str, Any]] = []
    threading.Thread(target=lambda: [lines.append(json.loads(x)) for x in child.stdout], daemon=True).start()  # type: ignore[union-attr]

    def until(what: str, check: Any, within: float) -> None:
        deadline = time.monotonic() + within
        while not check():
            assert time.monotonic() < deadline, f"not {what} within {within} s: {lines}"
            time.sleep(0.02)

    holder = socket.create_connection((host, int(port)), timeout=5)
    try:
        until("ready", lambda: any(x.get("ready") for x in lines), 15)
        holder.sendall(f"A {key} 0 2\n".encode())  # held for 2 s: then the child is granted
        assert holder.makefile().readline().startswith("A ")
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
        until("sent", lambda: any(x.get("sent") for x in lines), 15)
        child.send_signal(signal.SIGSTOP)
        time.sleep(9)  # > wait (3 s) + 5 s; the holder's lease ends at 2 s and the grant goes out
        assert ask(server.address, f"A {key} 0 1") == f"T {key}"  # held for the child meanwhile
        child.send_signal(signal.SIGCONT)
        until("an outcome", lambda: any("token" in x or "error" in x for x in lines), 10)
        outcome = next(x for x in lines if "token" in x or "error" in x)
        assert "error" not in outcome, outcome
        assert 10 < outcome["remaining"] < 30 * 0.98 - 9
        until("released", lambda: any("release" in x for x in lines), 10)
        assert next(x for x in lines if "release" in x)["release"] == "released"
        probe = ask(server.address, f"A {key} 0 1")  # free again at once, not after 30 s
        assert probe.startswith("A ")
    finally:
        child.send_signal(signal.SIGCONT)
        child.kill()
        child.wait(5)
        holder.close()
