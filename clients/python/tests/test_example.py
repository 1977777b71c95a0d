"""examples/python: two worker processes against the real server charge every order exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from servers import REPO, Server


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server([])
    yield s
    s.kill()


def test_two_processes_never_double_charge(server: Server) -> None:
    r = subprocess.run(
        [sys.executable, str(REPO / "examples" / "python" / "run_two_workers.py")],
        env={**os.environ, "TICKETING_ADDR": server.address},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "worker-1: rejected on order-1: stale fencing token" in r.stdout
    assert "worker-2: charged order-1" in r.stdout
    assert "every order was charged exactly once" in r.stdout
