"""Black-box: the client against the real ``bin/ticketing`` server (single node,
a priority-cluster failover, a Raft leader kill, TLS, client tokens)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import ticketing_client
from ticketing_client import AsyncTicketBroker, TicketBroker, TlsCa

from servers import BIN, Cluster, Server



@pytest.fixture(autouse=True)
def server_built() -> None:
    """These tests fail, never skip, without the server build (a skip passed CI once, ae342fd)."""
    if not (BIN.parent.parent / "packages/cli/dist/main.js").exists():
        pytest.fail(f"the server is not built: {BIN} needs packages/cli/dist/main.js (npm run build)")


def k() -> str:
    return f"py/{uuid.uuid4().hex[:12]}"


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server([])
    yield s
    s.kill()


async def test_fifo_hand_off_with_increasing_tokens(server: Server) -> None:
    async with AsyncTicketBroker(server.address) as broker:
        await broker.wait_ready(5)
        key = k()
        first = await broker.acquire(key, wait=0, lease=30)
        waiters = [asyncio.ensure_future(broker.acquire(key, wait=10, lease=30)) for _ in range(3)]
        await asyncio.to_thread(server.wait_for, "three waiters queued", lambda s: s.locks()["waiting"] == 3)
        # From another broker: on a connection where a waiter of this key is queued, the server
        # writes this T only after that waiter's reply (same (op, key) replies keep their order).
        async with AsyncTicketBroker(server.address) as other:
            await other.wait_ready(5)
            with pytest.raises(ticketing_client.LockTimeoutError):
                await other.acquire(key, wait=0, lease=30)
        tokens = [first.token]
        assert await first.release() == "released"
        # Each waiter gets the lock in turn: one holder at a time, tokens increasing.
        pending = list(waiters)
        while pending:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED, timeout=5)
            assert len(done) == 1, "exactly one holder at a time"
            d = done.pop()
            pending.remove(d)
            ticket = d.result()
            tokens.append(ticket.token)
            assert await ticket.release() == "released"
        assert tokens == sorted(tokens) and len(set(tokens)) == 4
        assert await broker.release(key, first.token) == "not-held"


async def test_async_with_and_cancellation_against_the_real_server(server: Server) -> None:
    async with AsyncTicketBroker(server.address) as broker:
        await broker.wait_ready(5)
        key = k()
        async with broker.acquire(key, wait=5, lease=30) as ticket:
            waiter = asyncio.ensure_future(broker.acquire(key, wait=20, lease=30))
            await asyncio.sleep(0.3)
            waiter.cancel()  # half-closes that connection: the server drops the waiter
            with pytest.raises(asyncio.CancelledError):
                await waiter
            assert ticket.remaining() > 25
        # Released on exit, and the cancelled waiter is not holding it.
        t2 = await broker.acquire(key, wait=0, lease=5)
        await t2.release()


def test_blocking_face_against_the_real_server(server: Server) -> None:
    with TicketBroker(server.address) as broker:
        broker.wait_ready(5)
        key = k()
        with broker.acquire(key, wait=0, lease=10) as t:
            with pytest.raises(ticketing_client.LockTimeoutError):
                broker.acquire(key, wait=0, lease=10)
        with broker.acquire(key, wait=0, lease=10) as t2:
            assert t2.token > t.token


def test_client_token_required_and_refused() -> None:
    s = Server(["--client-tokens", "good-token"])
    try:
        with TicketBroker(s.address, token="good-token") as ok:
            ok.wait_ready(5)
            with ok.acquire(k(), wait=0, lease=5):
                pass
        with TicketBroker(s.address, token="wrong") as bad:
            with pytest.raises(ticketing_client.AuthError):
                bad.wait_ready(1)
    finally:
        s.kill()


@pytest.fixture(scope="module")
def pki() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="ticketing-py-pki-"))

    def ssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    ssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "30", "-subj", "/CN=test-ca")
    ssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    ssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.crt", "-days", "30", "-extfile", "ext.cnf")
    yield d


def test_tls_modes(pki: Path) -> None:
    s = Server(["--tls-cert", str(pki / "server.crt"), "--tls-key", str(pki / "server.key")])
    try:
        for tls in (TlsCa(str(pki / "ca.crt")), TlsCa((pki / "ca.crt").read_text())):
            with TicketBroker(s.address, tls=tls) as b:
                b.wait_ready(5)
                with b.acquire(k(), wait=0, lease=5) as t:
                    assert t.token > 0
        with pytest.warns(RuntimeWarning, match="insecure"):
            insecure = TicketBroker(s.address, tls="insecure")
        with insecure:
            insecure.wait_ready(5)
        # The system roots do not know our test CA: no connection becomes usable.
        with TicketBroker(s.address, tls="system") as sys_b:
            with pytest.raises(ticketing_client.NoConnectionError):
                sys_b.wait_ready(1)
        # A plain client on a TLS listener gets no hello.
        with TicketBroker(s.address) as plain:
            with pytest.raises(ticketing_client.NoConnectionError):
                plain.wait_ready(1)
    finally:
        s.kill()


async def test_priority_cluster_failover() -> None:
    c = Cluster(["a", "b"])
    try:
        c.start_all()
        c.wait_for_active("a")
        # Only b configured: M from the standby is followed to a.
        async with AsyncTicketBroker(c.address("b")) as via_standby:
            await via_standby.wait_ready(5)
            t = await via_standby.acquire(k(), wait=0, lease=10)
            assert await t.release() == "released"
        async with AsyncTicketBroker([c.address("a"), c.address("b")]) as broker:
            await broker.wait_ready(5)
            held = await broker.acquire(k(), wait=0, lease=60)
            await asyncio.to_thread(c.servers["b"].wait_for, "replicated to b", lambda s: s.locks()["held"] == 1)
            c.kill("a")
            await asyncio.get_running_loop().run_in_executor(None, c.wait_for_active, "b")
            t0 = time.monotonic()
            ticket = None
            while ticket is None:
                try:
                    ticket = await broker.acquire(k(), wait=0, lease=10)
                except (ticketing_client.NoConnectionError, ticketing_client.IndeterminateError):
                    assert time.monotonic() - t0 < 10
                    await asyncio.sleep(0.1)
            assert ticket.token > held.token
            await ticket.release()
            # The lock held before the failover was replicated: its release reaches b.
            assert await held.release() == "released"
    finally:
        c.stop()


async def test_priority_step_down_re_sends_a_waiting_acquire() -> None:
    c = Cluster(["a", "b"])
    try:
        c.start_all()
        c.wait_for_active("a")
        async with AsyncTicketBroker([c.address("a"), c.address("b")]) as broker:
            await broker.wait_ready(5)
            key = k()
            holder = await broker.acquire(key, wait=0, lease=30)
            waiting = asyncio.ensure_future(broker.acquire(key, wait=20, lease=30))
            await asyncio.to_thread(c.servers["a"].wait_for, "the acquire queued on a", lambda s: s.locks()["waiting"] == 1)
            c.kill("a", signal.SIGTERM)  # graceful: a hands off to b and answers its waiter T early
            await asyncio.get_running_loop().run_in_executor(None, c.wait_for_active, "b")
            assert await holder.release() == "released"
            ticket = await asyncio.wait_for(waiting, 15)
            assert ticket.token > holder.token
            await ticket.release()
    finally:
        c.stop()


async def test_raft_leader_kill() -> None:
    c = Cluster(["a", "b", "c"], extra=["--mode", "raft"], data_dirs=True)
    try:
        c.start_all()
        loop = asyncio.get_running_loop()
        leader = await loop.run_in_executor(None, c.leader)
        async with AsyncTicketBroker([c.address(n) for n in c.names]) as broker:
            await broker.wait_ready(5)
            held = await broker.acquire(k(), wait=0, lease=60)
            c.kill(leader)
            new_leader = await loop.run_in_executor(None, c.leader)
            assert new_leader != leader
            t0 = time.monotonic()
            ticket = None
            while ticket is None:
                try:
                    ticket = await broker.acquire(k(), wait=0, lease=10)
                except (ticketing_client.NoConnectionError, ticketing_client.IndeterminateError):
                    assert time.monotonic() - t0 < 15
                    await asyncio.sleep(0.1)
            assert ticket.token > held.token
            await ticket.release()
            assert await held.release() == "released"  # committed before the kill: it survived
    finally:
        c.stop()


class Interrupted(Exception):
    pass


def test_blocking_acquire_interrupted_by_a_signal_is_aborted(server: Server) -> None:
    """Like Celery's soft time limit: an exception raised in the waiting thread aborts the acquire
    (the server drops the waiter), so it is not handed the lock afterwards."""

    def on_alarm(signum: int, frame: object) -> None:
        raise Interrupted()

    old = signal.signal(signal.SIGALRM, on_alarm)
    try:
        with TicketBroker(server.address) as broker:
            broker.wait_ready(5)
            key = k()
            holder = broker.acquire(key, wait=0, lease=30)
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            t0 = time.monotonic()
            with pytest.raises(Interrupted):
                broker.acquire(key, wait=20, lease=30)
            assert time.monotonic() - t0 < 2
            server.wait_for("the aborted waiter dropped", lambda s: s.locks()["waiting"] == 0)  # its FIN reached the server
            assert holder.release() == "released"
            # Free now: the aborted waiter was not handed the lock.
            with broker.acquire(key, wait=0, lease=5) as t:
                assert t.token > holder.token
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
