"""What a Python user expects of the API: real coroutines, bare hosts, URLs, a version,
connection-state events (issue 28 defect 9 and "what users expect")."""

from __future__ import annotations

import asyncio
import sys

import pytest

import ticketing_client
from ticketing_client import AsyncTicketBroker, ConnectionEvent, TlsCa
from ticketing_client._options import check_addresses

from fake import FakeServer


async def granting_server() -> FakeServer:
    """A fake that answers every hello and grants every acquire with token 7."""
    s = await FakeServer().start()

    async def serve() -> None:
        while True:
            c = await s.accept(timeout=60)

            async def run(c=c) -> None:  # type: ignore[no-untyped-def]
                await c.greet()
                while True:
                    line = await c.expect("", timeout=60)
                    op, key = line.split(" ")[:2] if " " in line else (line, "")
                    c.send("P" if op == "P" else f"A 7 {key}" if op == "A" else f"R {key}")

            asyncio.ensure_future(run())

    asyncio.ensure_future(serve())
    return s


async def test_acquire_is_a_coroutine_for_create_task_and_task_groups() -> None:
    s = await granting_server()
    async with AsyncTicketBroker(s.address) as broker:
        await broker.wait_ready(2)
        task = asyncio.create_task(broker.acquire("k1", wait=0, lease=10))
        assert (await task).token == 7
        done, _ = await asyncio.wait([asyncio.ensure_future(broker.acquire("k2", wait=0, lease=10))])
        assert done.pop().result().token == 7
        assert (await asyncio.wait_for(broker.acquire("k3", wait=0, lease=10), 2)).token == 7
        if sys.version_info >= (3, 11):
            async with asyncio.TaskGroup() as tg:
                t = tg.create_task(broker.acquire("k4", wait=0, lease=10))
            assert t.result().token == 7
        async with broker.acquire("k5", wait=0, lease=10) as ticket:
            assert ticket.token == 7


async def test_awaiting_an_acquire_twice_raises_and_sends_one_acquire() -> None:
    s = await FakeServer().start()
    broker = AsyncTicketBroker(s.address)
    a = await s.accept_greeted()
    await s.accept_greeted()
    await broker.wait_ready(2)
    call = broker.acquire("k", wait=0, lease=10)
    first = asyncio.ensure_future(call)
    line = None
    for c in s.all:
        try:
            line = await c.expect("A k", timeout=0.5)
            c.send("A 7 k")
            break
        except asyncio.TimeoutError:
            continue
    assert line == "A k 0 10"
    assert (await first).token == 7
    with pytest.raises(RuntimeError):
        await call
    for c in s.all:
        await c.nothing(0.2)
    await broker.close()
    await s.stop()
    del a


def test_a_bare_host_means_port_5225_like_the_other_clients() -> None:
    assert check_addresses("db1")[0] == ["db1:5225"]
    assert check_addresses(["[::1]", "10.0.0.2:7000"])[0] == ["[::1]:5225", "10.0.0.2:7000"]
    for bad in ["h:", "::1", "a b", "", "h:0", "h:65536"]:
        with pytest.raises(ticketing_client.InvalidArgumentError):
            check_addresses(bad)


def test_connection_urls() -> None:
    assert check_addresses("ticketing://s3cret@10.0.0.1:5225,10.0.0.2?tls=system") == (
        ["10.0.0.1:5225", "10.0.0.2:5225"],
        "s3cret",
        "system",
    )
    assert check_addresses("ticketing://a%40b@[::1]:7000/?ca=/etc/ca.pem") == (["[::1]:7000"], "a@b", TlsCa("/etc/ca.pem"))
    assert check_addresses("ticketing://h") == (["h:5225"], None, None)
    for bad in ["ticketing://", "ticketing://h?tls=maybe", "ticketing://h?x=1", "ticketing://h:99999"]:
        with pytest.raises(ticketing_client.InvalidArgumentError):
            check_addresses(bad)


async def test_a_url_token_goes_into_the_hello_and_must_agree_with_the_argument() -> None:
    s = await FakeServer().start()
    broker = AsyncTicketBroker(f"ticketing://s3cret@{s.address}")
    c = await s.accept()
    assert await c.expect() == "H 1 s3cret"
    await broker.close()
    with pytest.raises(ticketing_client.InvalidArgumentError):
        AsyncTicketBroker(f"ticketing://s3cret@{s.address}", token="other")
    await s.stop()


def test_the_version_is_the_distributions() -> None:
    from importlib.metadata import version

    assert ticketing_client.__version__ == version("ticketing-client")


async def test_connection_state_events_and_state() -> None:
    events: list[ConnectionEvent] = []
    active = await FakeServer().start()
    standby = await FakeServer().start()
    broker = AsyncTicketBroker(standby.address, on_connection_event=events.append)
    for _ in range(2):
        c = await standby.accept()
        await c.expect("H 1")
        c.send(f"M {active.address}")
    a1 = await active.accept_greeted("n1")
    await active.accept_greeted("n1")
    await broker.wait_ready(2)
    await asyncio.sleep(0.05)
    kinds = [(e.kind, e.to) for e in events]
    assert kinds.count(("redirected", active.address)) == 2
    assert kinds.count(("connected", None)) == 2
    connected = [e for e in events if e.kind == "connected"]
    assert all(e.address == active.address and e.configured == standby.address and e.node_name == "n1" for e in connected)
    st = broker.state
    assert st.usable == 2 and not st.closed
    assert [(x.configured, x.address, x.state, x.node_name) for x in st.connections] == [
        (standby.address, active.address, "ready", "n1")
    ] * 2
    events.clear()
    a1.reset()
    for _ in range(100):
        if any(e.kind == "disconnected" for e in events):
            break
        await asyncio.sleep(0.02)
    lost = [e for e in events if e.kind == "disconnected"]
    assert len(lost) == 1 and lost[0].address == active.address and lost[0].error is not None
    await broker.close()
    assert broker.state.closed
    await active.stop()
    await standby.stop()


async def test_a_raising_event_handler_is_reported_not_fatal() -> None:
    errors: list[BaseException] = []

    def boom(e: ConnectionEvent) -> None:
        raise ValueError("listener bug")

    s = await granting_server()
    async with AsyncTicketBroker(s.address, on_connection_event=boom, on_error=errors.append) as broker:
        await broker.wait_ready(2)
        assert (await broker.acquire("k", wait=0, lease=10)).token == 7
    assert any(isinstance(e, ValueError) for e in errors)
