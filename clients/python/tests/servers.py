"""Real ``bin/ticketing`` servers and clusters on loopback for the black-box tests.

Like test/helpers/server.ts and cluster.ts: each node runs ``ticketing server``
on a free port (client port P, peer port P+1) and is ready when it prints its
ready line. Every process is killed at stop.
"""

from __future__ import annotations

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
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[3]
BIN = REPO / "bin" / "ticketing"


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_port_pair() -> int:
    """Two consecutive free ports below the ephemeral range (client port, peer port)."""
    for _ in range(200):
        base = 20_000 + random.randrange(0, 6_000) * 2
        if _port_free(base) and _port_free(base + 1):
            return base
    raise RuntimeError("no free port pair")


class Server:
    """One running ``ticketing server`` process."""

    def __init__(self, args: list[str], env: Optional[dict[str, str]] = None) -> None:
        full = ["node", str(BIN), "server"]
        if not any(a.startswith("--listen") for a in args):
            full += ["--listen", "127.0.0.1:0"]
        if "--data-dir" not in args and "--memory" not in args and "--config" not in args:
            full.append("--memory")
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
        threading.Thread(target=self._drain_stdout, daemon=True).start()

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def _drain_stdout(self) -> None:
        assert self.proc.stdout is not None
        for _ in self.proc.stdout:
            pass

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
