"""Runner of the shared client conformance suite (testdata/conformance/*.case,
format in testdata/conformance/README.md): scripted fake servers on loopback,
the Python asyncio client under test, real (short) time."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import ssl
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

import ticketing_client
from ticketing_client import AsyncTicketBroker, TlsCa
from ticketing_client._timing import timing

SUITE = Path(os.environ.get("CONFORMANCE_DIR") or Path(__file__).resolve().parents[3] / "testdata" / "conformance")
TLS = SUITE / "tls"

KNOBS = {
    "reconnectMs": "reconnect",
    "idlePingMs": "idle_ping",
    "pongTimeoutMs": "pong_timeout",
    "replyGraceMs": "reply_grace",
    "releaseWindowMs": "release_window",
    "releaseResendMs": "release_resend",
    "retryMs": "retry",
    "earlyTimeoutMs": "early_timeout",
}


@dataclass
class Step:
    line_no: int
    words: list[str]
    text: str  # the directive line, single-spaced


@dataclass
class Case:
    name: str
    file: str
    line_no: int
    steps: list[Step] = field(default_factory=list)


def load_cases() -> list[Case]:
    cases: list[Case] = []
    for path in sorted(SUITE.glob("*.case")):
        current: Optional[Case] = None
        for i, raw in enumerate(path.read_text("utf-8").split("\n"), start=1):
            stripped = raw.strip()
            if stripped == "" or stripped.startswith("#"):
                continue
            words = stripped.split()
            if words[0] == "case":
                current = Case(words[1], path.name, i)
                cases.append(current)
                continue
            assert current is not None, f"{path.name}:{i}: a directive before the first case"
            current.steps.append(Step(i, words, " ".join(words)))
    return cases


def matches(pattern: str, line: str) -> bool:
    p, f = pattern.split(" "), line.split(" ")
    return len(p) == len(f) and all(a == "*" or a == b for a, b in zip(p, f))


class Line:
    def __init__(self, text: str) -> None:
        self.text = text
        self.matched = False


class FakeConn:
    def __init__(self, server: FakeServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.lines: list[Line] = []
        self.eof = False
        self.name: Optional[str] = None
        self.task = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        buf = b""
        try:
            while True:
                data = await self.reader.read(4096)
                if not data:
                    break
                buf += data
                while b"\n" in buf:
                    raw, buf = buf.split(b"\n", 1)
                    text = raw.decode("utf-8", "replace").removesuffix("\r")
                    self.lines.append(Line(text))
                    self._answer(text)
        except (ConnectionError, OSError):
            pass
        self.eof = True

    def _answer(self, text: str) -> None:
        s = self.server
        fields = text.split(" ")
        if fields[0] == "H":
            if s.hello != "none":
                self.send(s.subst(s.hello) if s.hello is not None else f"H 1 {s.name}")
            return
        if text == "P" and s.pong:
            self.send("P")
            return
        for pattern, reply in s.autos:
            if matches(pattern, text):
                out = re.sub(r"\$(\d+)", lambda m: fields[int(m.group(1)) - 1], reply)
                self.send(s.subst(out))
                return

    def send(self, text: str, raw: bool = False) -> None:
        if self.writer.is_closing():
            return
        try:
            self.writer.write(text.encode("utf-8") + b"\n")
            if not raw and (text.startswith("M ") or text.startswith("E ")):
                self.fin()
        except (ConnectionError, OSError, RuntimeError):
            pass

    def fin(self) -> None:
        try:
            if self.writer.can_write_eof() and not self.writer.is_closing():
                self.writer.write_eof()
        except (ConnectionError, OSError, RuntimeError):
            pass

    def reset(self) -> None:
        sock = self.writer.transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
        self.writer.transport.abort()


class FakeServer:
    def __init__(self, name: str, refused: bool, tls: bool = False) -> None:
        self.name = name
        self.refused = refused
        self.tls = tls
        self.hello: Optional[str] = None
        self.pong = True
        self.autos: list[tuple[str, str]] = []
        self.conns: list[FakeConn] = []
        self.server: Optional[asyncio.AbstractServer] = None
        self.port = 0
        self.subst: Callable[[str], str] = lambda text: text

    async def start(self) -> None:
        if self.refused:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
            return
        ctx = None
        if self.tls:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(TLS / "cert.pem", TLS / "key.pem")
        self.server = await asyncio.start_server(self._on_conn, "127.0.0.1", 0, ssl=ctx)
        self.port = self.server.sockets[0].getsockname()[1]

    def _on_conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.conns.append(FakeConn(self, reader, writer))

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for c in self.conns:
            c.writer.transport.abort()
            c.task.cancel()


class StepFailed(AssertionError):
    pass


class Runner:
    def __init__(self, case: Case) -> None:
        self.case = case
        self.servers: dict[str, FakeServer] = {}
        self.bound: dict[str, FakeConn] = {}
        self.actions: dict[str, asyncio.Future[Any]] = {}
        self.client_addrs: list[str] = []
        self.token: Optional[str] = None
        self.broker: Optional[AsyncTicketBroker] = None

    def sub(self, text: str) -> str:
        text = re.sub(r"\{(.)\*(\d+)\}", lambda m: m.group(1) * int(m.group(2)), text)
        return re.sub(r"\{([a-z0-9]+)\}", lambda m: f"127.0.0.1:{self.servers[m.group(1)].port}", text)

    def all_conns(self) -> list[FakeConn]:
        return [c for s in self.servers.values() for c in s.conns]

    def target(self, name: str) -> list[FakeConn]:
        if name == "*":
            return self.all_conns()
        if name in self.servers:
            return list(self.servers[name].conns)
        if name in self.bound:
            return [self.bound[name]]
        raise StepFailed(f"unknown target {name}")

    async def poll(self, cond: Any, ms: float, what: str) -> Any:
        loop = asyncio.get_running_loop()
        until = loop.time() + ms / 1000
        while True:
            r = cond()
            if r:
                return r
            if loop.time() > until:
                raise StepFailed(f"timed out after {ms} ms waiting for {what}")
            await asyncio.sleep(0.01)

    async def run(self) -> None:
        steps = self.case.steps
        i = 0
        # Setup directives.
        setup = {"server", "client", "token", "hello", "pong", "auto", "timing"}
        while i < len(steps) and steps[i].words[0] in setup:
            self.setup(steps[i])
            i += 1
        for s in self.servers.values():
            await s.start()
        timing.tick = 0.05
        try:
            try:
                addrs = [f"127.0.0.1:{self.servers[n].port}" for n in self.client_addrs]
                tls = TlsCa(str(TLS / "ca.pem")) if any(s.tls for s in self.servers.values()) else None
                self.broker = AsyncTicketBroker(
                    addrs[0] if len(addrs) == 1 else addrs, token=self.token, tls=tls, on_error=lambda err: None
                )
                for step in steps[i:]:
                    try:
                        await self.step(step)
                    except StepFailed as err:
                        raise StepFailed(f"{self.case.file}:{step.line_no} `{step.text}`: {err}\n{self.dump()}") from None
            finally:
                if self.broker is not None:
                    try:
                        await asyncio.wait_for(self.broker.close(), 10)
                    except Exception:  # noqa: BLE001 - errors from the final close are ignored
                        pass
        finally:
            for a in self.actions.values():
                if not a.done():
                    a.cancel()
            for s in self.servers.values():
                await s.stop()

    def dump(self) -> str:
        out = []
        for s in self.servers.values():
            for n, c in enumerate(s.conns):
                out.append(f"  {s.name}#{n} ({c.name or '-'}{', eof' if c.eof else ''}): {[x.text for x in c.lines]}")
        return "\n".join(out)

    def setup(self, step: Step) -> None:
        w = step.words
        if w[0] == "server":
            self.servers[w[1]] = FakeServer(w[1], len(w) > 2 and w[2] == "refused", len(w) > 2 and w[2] == "tls")
            self.servers[w[1]].subst = self.sub
        elif w[0] == "client":
            self.client_addrs = w[1:]
        elif w[0] == "token":
            self.token = w[1]
        elif w[0] == "hello":
            rest = " ".join(w[2:])
            self.servers[w[1]].hello = rest
        elif w[0] == "pong":
            self.servers[w[1]].pong = w[2] != "off"
        elif w[0] == "auto":
            arrow = w.index("=>")
            self.servers[w[1]].autos.append((" ".join(w[2:arrow]), " ".join(w[arrow + 1 :])))
        elif w[0] == "timing":
            for kv in w[1:]:
                k, v = kv.split("=")
                setattr(timing, KNOBS[k], int(v) / 1000)

    def start_action(self, ident: str, coro: Any) -> None:
        self.actions[ident] = asyncio.ensure_future(coro)

    def ticket(self, ident: str) -> Any:
        acq = self.actions[ident]
        if not acq.done() or acq.cancelled() or acq.exception() is not None:
            raise StepFailed(f"acquire {ident} returned no ticket ({describe(acq)})")
        return acq.result()

    async def step(self, step: Step) -> None:
        w = step.words
        op = w[0]
        b = self.broker
        assert b is not None
        if op in ("hello", "pong", "auto"):
            self.setup(step)
        elif op == "raw":
            self.bound[w[1]].send(self.sub(" ".join(w[2:])), raw=True)
        elif op == "pause":
            time.sleep(int(w[1]) / 1000)  # blocks the event loop: nothing of the client runs meanwhile
        elif op == "extend":
            lease_ms = int(dict(x.split("=") for x in w[3:])["lease"])

            async def extend(t: Any = self.ticket(w[2])) -> str:
                await t.extend(lease_ms / 1000)
                return "extended"

            self.start_action(w[1], extend())
        elif op == "dispose":
            self.start_action(w[1], self.ticket(w[2]).dispose())
        elif op == "remaining":
            lo, hi = span(w[2])
            left = self.ticket(w[1]).remaining() * 1000
            if not lo <= left <= hi:
                raise StepFailed(f"remaining() is {left:.1f} ms")
        elif op == "signal":
            t = self.ticket(w[1])

            def fired() -> str:
                return "RELEASED" if t.released else "LEASE_ENDED" if t.lease_ended.is_set() else "none"

            if w[2] == "none":
                if fired() != "none":
                    raise StepFailed(f"the signal fired: {fired()}")
            else:
                ms = float(w[4]) if len(w) > 4 else 3000
                await self.poll(lambda: fired() != "none", ms, "the signal")
                if fired() != w[2]:
                    raise StepFailed(f"the signal fired {fired()}")
        elif op == "acquire":
            ident, key = w[1], w[2]
            opts = dict(x.split("=") for x in w[3:])
            wait, lease = int(opts["wait"]) / 1000, int(opts["lease"]) / 1000
            min_work = int(opts.get("minwork", "0")) / 1000
            keep_alive = opts.get("keepalive") == "on"

            async def acquire() -> Any:
                return await b.acquire(key, wait=wait, lease=lease, min_work=min_work, keep_alive=keep_alive)

            if opts.get("abort") == "now":
                # Cancelled after the client queued the request, before its loop wrote it.
                if sys.version_info >= (3, 12):
                    task = asyncio.Task(acquire(), loop=asyncio.get_running_loop(), eager_start=True)  # runs now, to its first suspension
                else:
                    task = asyncio.ensure_future(acquire())
                    await asyncio.sleep(0)  # lets it run to its first suspension (the A is queued)
                task.cancel()
            else:
                task = asyncio.ensure_future(acquire())
            self.actions[ident] = task
        elif op == "abort":
            self.actions[w[1]].cancel()
        elif op == "release":
            if len(w) == 3:
                self.start_action(w[1], self.ticket(w[2]).release())
            else:
                self.start_action(w[1], b.release(w[2], int(w[3])))
        elif op == "ready":
            self.start_action(w[1], b.wait_ready(int(w[2]) / 1000))
        elif op == "close":
            self.start_action(w[1], b.close())
        elif op == "outcome":
            ident = w[1]
            rest = w[2:]
            ms = 3000.0
            if len(rest) >= 2 and rest[-2] == "within":
                ms = float(rest[-1])
                rest = rest[:-2]
            expected = " ".join(rest)
            fut = self.actions[ident]
            try:
                await asyncio.wait_for(asyncio.shield(fut), ms / 1000)
            except asyncio.TimeoutError:
                if not fut.done():
                    raise StepFailed(f"{ident} did not settle within {ms} ms (expected {expected})") from None
            except BaseException:  # noqa: BLE001 - the outcome is read below
                pass
            got = describe(fut)
            if got != expected:
                raise StepFailed(f"{ident}: expected {expected}, got {got}")
        elif op == "pending":
            if self.actions[w[1]].done():
                raise StepFailed(f"{w[1]} settled: {describe(self.actions[w[1]])}")
        elif op == "sleep":
            await asyncio.sleep(int(w[1]) / 1000)
        elif op == "conn":
            server, name = self.servers[w[1]], w[3]

            def free() -> Optional[FakeConn]:
                for c in server.conns:
                    if c.name is None and c.lines:
                        return c
                return None

            c = await self.poll(free, 3000, f"a connection to {w[1]}")
            c.name = name
            self.bound[name] = c
        elif op == "expect":
            bind = None
            parts = w[2:]
            ms = 3000.0
            if len(parts) >= 2 and parts[-2] == "within":
                ms = float(parts[-1])
                parts = parts[:-2]
            if len(parts) >= 2 and parts[-2] == "->":
                bind = parts[-1]
                parts = parts[:-2]
            pattern = self.sub(" ".join(parts))

            def find() -> Optional[tuple[FakeConn, Line]]:
                for c in self.target(w[1]):
                    for line in c.lines:
                        if not line.matched and matches(pattern, line.text):
                            return c, line
                return None

            c, line = await self.poll(find, ms, f"a line matching {pattern!r} on {w[1]}")
            line.matched = True
            if bind is not None:
                if bind in self.bound and self.bound[bind] is not c:
                    raise StepFailed(f"{bind} is bound to another connection")
                c.name = c.name or bind
                self.bound[bind] = c
        elif op == "count":
            pattern = self.sub(" ".join(w[2:-1]))
            n = sum(1 for c in self.target(w[1]) for line in c.lines if matches(pattern, line.text))
            lo, hi = span(w[-1])
            if not lo <= n <= hi:
                raise StepFailed(f"{n} lines match {pattern!r}, expected {w[-1]}")
        elif op == "distinct":
            if self.bound[w[1]] is self.bound[w[2]]:
                raise StepFailed(f"{w[1]} and {w[2]} are the same connection")
        elif op == "eof":
            ms = float(w[3]) if len(w) > 3 else 3000
            c = self.bound[w[1]]
            await self.poll(lambda: c.eof, ms, f"the client's side of {w[1]} to end")
        elif op == "open":
            if self.bound[w[1]].eof:
                raise StepFailed(f"the client's side of {w[1]} ended")
        elif op == "send":
            self.bound[w[1]].send(self.sub(" ".join(w[2:])))
        elif op == "fin":
            self.bound[w[1]].fin()
        elif op == "reset":
            self.bound[w[1]].reset()
        else:
            raise StepFailed(f"unknown step {op}")


def span(text: str) -> tuple[float, float]:
    """``n`` or ``lo..hi``."""
    lo, _, hi = text.partition("..")
    return float(lo), float(hi or lo)


def describe(fut: asyncio.Future[Any]) -> str:
    if not fut.done():
        return "pending"
    if fut.cancelled():
        return "ABORTED"
    err = fut.exception()
    if err is not None:
        if isinstance(err, ticketing_client.TicketingError):
            return err.code
        return f"{type(err).__name__}: {err}"
    result = fut.result()
    if isinstance(result, ticketing_client.AsyncTicket):
        return f"ticket {result.token}"
    if result is None:
        return "ok"
    return str(result)


CASES = load_cases()


def test_the_suite_is_there() -> None:
    assert len(CASES) >= 30


@pytest.mark.parametrize("case", CASES, ids=[f"{c.file}:{c.name}" for c in CASES])
async def test_case(case: Case) -> None:
    await Runner(case).run()
