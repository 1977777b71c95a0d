"""The blocking face: thread-safe, the same core, lease_ended as a threading.Event."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import ticketing_client
from ticketing_client import TicketBroker

from fake import FakeServer


class FakeInThread:
    """A fake server on its own loop thread that grants every acquire with increasing tokens."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(self._start(), self.loop).result()
        self.address = self.server.address
        self.next_token = 1
        self.lines: list[str] = []

    async def _start(self) -> FakeServer:
        s = await FakeServer().start()
        asyncio.ensure_future(self._serve(s))
        return s

    async def _serve(self, s: FakeServer) -> None:
        while True:
            c = await s.conns.get()
            asyncio.ensure_future(self._conn(c))

    async def _conn(self, c) -> None:  # type: ignore[no-untyped-def]
        while True:
            try:
                line = await c.expect("", timeout=60)
            except AssertionError:
                return
            self.lines.append(line)
            parts = line.split(" ")
            if parts[0] == "H":
                c.send("H 1 fake")
            elif parts[0] == "A":
                c.send(f"A {self.next_token} {parts[1]}")
                self.next_token += 1
            elif parts[0] == "R":
                c.send(f"R {parts[1]}")
            elif parts[0] == "P":
                c.send("P")

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()

    async def _stop(self) -> None:
        await self.server.stop()
        for t in asyncio.all_tasks():
            if t is not asyncio.current_task():
                t.cancel()
        await asyncio.sleep(0)


def test_threads_share_one_broker() -> None:
    fake = FakeInThread()
    broker = TicketBroker(fake.address)
    broker.wait_ready(2)
    tokens: list[int] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        for j in range(20):
            with broker.acquire(f"k{i}-{j}", wait=1, lease=5) as ticket:
                assert ticket.remaining() > 4
                with lock:
                    tokens.append(ticket.token)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(tokens)) == 160
    time.sleep(0.1)
    assert sum(1 for x in fake.lines if x.startswith("R ")) == 160
    broker.close()
    with pytest.raises(ticketing_client.ClosedError):
        broker.acquire("k", wait=0, lease=1)
    fake.stop()


def test_lease_ended_is_a_threading_event_and_release_returns_the_first_result() -> None:
    fake = FakeInThread()
    with TicketBroker(fake.address) as broker:
        broker.wait_ready(2)
        ticket = broker.acquire("k", wait=0, lease=1)
        assert ticket.lease_ended.wait(1.5)
        assert ticket.remaining() == 0
        assert ticket.release() == "released"
        assert ticket.release() == "released"
        with pytest.raises(ticketing_client.InvalidArgumentError):
            broker.acquire("bad key", wait=0, lease=1)
        with pytest.raises(ticketing_client.InvalidArgumentError):
            broker.release("k", 0)
    fake.stop()


def test_no_connection() -> None:
    s = FakeInThread()
    s.stop()  # nothing listens any more
    with TicketBroker(s.address) as broker:
        with pytest.raises(ticketing_client.NoConnectionError):
            broker.wait_ready(0.3)
        with pytest.raises(ticketing_client.NoConnectionError):
            broker.acquire("k", wait=0, lease=1)


def test_an_interrupt_just_as_the_grant_came_releases_the_ticket(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28, 11: the waiting thread is interrupted (KeyboardInterrupt, a Celery soft time limit)
    right after the acquire finished on the loop thread: nobody will see that ticket, so the client
    releases it instead of leaving the key held for its lease."""
    import concurrent.futures

    fake = FakeInThread()
    broker = TicketBroker(fake.address)
    broker.wait_ready(2)
    real_result = concurrent.futures.Future.result

    interrupts: list[bool] = []

    def interrupted(self: concurrent.futures.Future[object], timeout: object = None) -> object:
        if interrupts:
            return real_result(self, timeout)  # type: ignore[arg-type]
        interrupts.append(True)
        real_result(self)  # the coroutine has finished: a ticket exists
        raise KeyboardInterrupt

    monkeypatch.setattr(concurrent.futures.Future, "result", interrupted)
    with pytest.raises(KeyboardInterrupt):
        broker.acquire("k", wait=0, lease=30)
    monkeypatch.setattr(concurrent.futures.Future, "result", real_result)
    deadline = time.monotonic() + 2
    while not any(line.startswith("R k ") for line in fake.lines) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [line for line in fake.lines if line.startswith("R k ")] == ["R k 1"]
    broker.close()
