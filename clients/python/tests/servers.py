"""Real ``bin/ticketing`` servers and clusters on loopback for the black-box tests.

Like test/helpers/server.ts and cluster.ts: each node runs ``ticketing server``
on a free port (client port P, peer port P+1) and is ready when it prints its
ready line. Every process is killed at stop.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Callable, Optional

REPO = Path(__file__).resolve().parents[3]
BIN = REPO / "bin" / "ticketing"


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except OSError:
        return 32768  # not Linux: the usual default


# The project's allocator (as @ticketing/test-support's): ports below the ephemeral range, so no
# outgoing connection takes one before a server binds it or while a test restarts a server on it;
# each process walks the range from a random start and never hands out a port twice.
_LOW = 10_000
_SPAN = _ephemeral_low() - _LOW - 1
_cursor = random.randrange(0, _SPAN)


def free_port_pair() -> int:
    """Two consecutive free ports below the ephemeral range (client port, peer port)."""
    global _cursor
    for _ in range(_SPAN):
        base = _LOW + _cursor
        _cursor = (_cursor + 2) % _SPAN
        if _port_free(base) and _port_free(base + 1):
            return base
    raise RuntimeError("no free port pair below the ephemeral range")


class Server:
    """One running ``ticketing server`` process."""

    def __init__(self, args: list[str], env: Optional[dict[str, str]] = None) -> None:
        full = ["node", str(BIN), "server"]
        if not any(a.startswith("--listen") for a in args):
            full += ["--listen", "127.0.0.1:0"]
        if "--data-dir" not in args and "--memory" not in args and "--config" not in args:
            full.append("--memory")
        # The admin listener's default (client port + 4000) could take a port another test was handed.
        if "--http" not in args and "--config" not in args:
            full += ["--http", "127.0.0.1:0"]
        full += args
        self.proc = subprocess.Popen(
            full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})}, text=True
        )
        self.stderr: list[str] = []
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        assert self.proc.stdout is not None
        line = _readline_with_timeout(self.proc, 15)
        m = re.search(r"listen=(\S+):(\d+)", line)
        if m is None:
            self.kill()
            raise RuntimeError(f"server did not get ready: {line!r} {''.join(self.stderr)}")
        self.port = int(m.group(2))
        self.address = f"127.0.0.1:{self.port}"
        h = re.search(r" http=(\S+)", line)
        self.http = h.group(1) if h else None
        threading.Thread(target=self._drain_stdout, daemon=True).start()

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def _drain_stdout(self) -> None:
        assert self.proc.stdout is not None
        for _ in self.proc.stdout:
            pass

    def locks(self) -> dict[str, int]:
        """``locks`` of the node's /status: ``held`` and ``waiting`` (tests wait on these, not on sleeps)."""
        if self.http is None:
            raise RuntimeError("the server runs without an admin listener")
        with urllib.request.urlopen(f"http://{self.http}/status", timeout=5) as r:
            locks: dict[str, int] = json.load(r)["locks"]
            return locks

    def wait_for(self, what: str, condition: Callable[["Server"], bool], timeout: float = 5) -> None:
        """Polls ``condition`` until it holds; fails after ``timeout`` seconds."""
        until = time.monotonic() + timeout
        while not condition(self):
            if time.monotonic() > until:
                raise AssertionError(f"not {what} within {timeout} s")
            time.sleep(0.02)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _readline_with_timeout(proc: "subprocess.Popen[str]", timeout: float) -> str:
    out: list[str] = []
    t = threading.Thread(target=lambda: out.append(proc.stdout.readline() if proc.stdout else ""), daemon=True)
    t.start()
    t.join(timeout)
    return out[0] if out else ""


class Cluster:
    """A priority or Raft cluster of named nodes (``--peers`` in priority order)."""

    def __init__(self, names: list[str], extra: Optional[list[str]] = None, data_dirs: bool = False) -> None:
        self.names = names
        self.ports = {n: free_port_pair() for n in names}
        self.extra = extra or []
        self.dirs = {n: tempfile.mkdtemp(prefix=f"ticketing-py-{n}-") for n in names} if data_dirs else {}
        self.servers: dict[str, Server] = {}

    def address(self, name: str) -> str:
        return f"127.0.0.1:{self.ports[name]}"

    def start(self, name: str) -> Server:
        peers = ",".join(f"{n}=127.0.0.1:{self.ports[n]}" for n in self.names)
        storage = ["--data-dir", self.dirs[name]] if name in self.dirs else ["--memory"]
        # A cluster refuses to start without peer authentication: the nodes share a peer token.
        # Peer tokens need at least 128 bits.
        auth = ["--peer-token", "70792d746573742d70656572732d3132382d626974732d6174206c65617374"]
        s = Server(["--listen", self.address(name), "--node", name, "--peers", peers, *auth, *storage, *self.extra])
        self.servers[name] = s
        return s

    def start_all(self) -> None:
        for n in self.names:
            self.start(n)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        s = self.servers.pop(name, None)
        if s is not None:
            s.kill(sig)

    def role_of(self, name: str) -> tuple[str, str]:
        """('active', '') when the node answers P; ('standby', address) for M; ('down', '')."""
        try:
            with socket.create_connection(("127.0.0.1", self.ports[name]), timeout=2) as s:
                s.sendall(b"P\n")
                data = b""
                while not data.endswith(b"\n"):
                    chunk = s.recv(100)
                    if not chunk:
                        break
                    data += chunk
        except OSError:
            return ("down", "")
        line = data.decode().strip()
        if line == "P":
            return ("active", "")
        if line.startswith("M "):
            return ("standby", line[2:])
        return ("down", "")

    def wait_for_active(self, expected: str, timeout: float = 15) -> None:
        """Until ``expected`` is the only active node and every other running one redirects (not ``M -``)."""
        until = time.monotonic() + timeout
        while True:
            roles = {n: self.role_of(n) for n in self.servers}
            actives = [n for n, r in roles.items() if r[0] == "active"]
            settled = all(r[0] != "standby" or r[1] != "-" for r in roles.values())
            if settled and actives == [expected]:
                return
            if time.monotonic() > until:
                raise RuntimeError(f"expected active {expected}, got {roles}")
            time.sleep(0.05)

    def leader(self, timeout: float = 15) -> str:
        until = time.monotonic() + timeout
        while True:
            roles = {n: self.role_of(n) for n in self.servers}
            actives = [n for n, r in roles.items() if r[0] == "active"]
            if len(actives) == 1 and all(r[0] != "standby" or r[1] != "-" for r in roles.values()):
                return actives[0]
            if time.monotonic() > until:
                raise RuntimeError(f"no single leader: {roles}")
            time.sleep(0.05)

    def stop(self) -> None:
        for n in list(self.servers):
            self.kill(n)
        for d in self.dirs.values():
            shutil.rmtree(d, ignore_errors=True)
