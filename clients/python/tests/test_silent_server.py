"""A server that goes silent (a stopped process, a frozen VM; issue 26 defect 9) is given up within about 2 s
of its last data, and the broker's other connections to it are checked at once and spared meanwhile."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

import ticketing_client
from ticketing_client import AsyncTicketBroker
from ticketing_client._timing import timing

from fake import FakeConn, FakeServer
from test_core import next_line
from test_core import setup as connected_broker


def refused_address() -> str:
    """An address nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


async def test_a_silent_server_with_an_acquire_outstanding_is_given_up_within_about_2_s_of_its_last_data() -> None:
    # The contract's busy ping (0.75 s) and pong deadline (1 s), checked at the default tick. The idle ping is
    # shortened only to learn the tick's phase: it is sent on a tick, and its pong (the last data) comes
    # 80 ms later, so the tick that finds 0.75 s of quiet comes up to a tick later. A tick of 0.5 s then
    # pinged only 1.5 s after the last data and gave up after 2.5 s; 0.1 s gives up within 2 s.
    timing.idle_ping = 0.3
    s = await FakeServer().start()
    broker = AsyncTicketBroker([s.address, refused_address()])
    a = await s.accept_greeted()
    await broker.wait_ready(2)
    await a.expect("P", timeout=2)
    await asyncio.sleep(0.08)
    a.send("P")
    last_data = time.monotonic()
    acquire = asyncio.ensure_future(broker.acquire("k", wait=30, lease=30))
    await a.expect("A k 30 30")
    # Silent from here on: the busy ping goes unanswered.
    await a.expect("P", timeout=2)
    await asyncio.wait_for(a.eof.wait(), 5)
    took = time.monotonic() - last_data
    assert took < 2.1, f"given up {took:.2f} s after the last data"
    with pytest.raises(ticketing_client.IndeterminateError):
        await acquire
    await broker.close()
    await s.stop()


async def silent_on_the_carrier() -> tuple[list[FakeServer], AsyncTicketBroker, FakeConn]:
    """Two connections to one address; an acquire dies of silence on one of them. Returns the other."""
    timing.busy_ping = 0.2
    timing.busy_pong_timeout = 0.2
    timing.idle_ping = 60
    timing.pong_timeout = 60
    timing.tick = 0.02
    timing.reconnect = 60
    servers, broker, conns = await connected_broker()
    acquire = asyncio.ensure_future(broker.acquire("k", wait=0, lease=1))
    carrier = await next_line(conns, "A k 0 1")
    sibling = conns[1] if carrier is conns[0] else conns[0]
    with pytest.raises(ticketing_client.IndeterminateError):
        await asyncio.wait_for(acquire, 3)
    return servers, broker, sibling


async def test_when_one_connection_dies_of_silence_the_other_to_that_server_is_pinged_at_once_and_gets_no_request() -> None:
    t0 = time.monotonic()
    servers, broker, sibling = await silent_on_the_carrier()
    # The idle sibling (its own ping would come after 60 s) got a P the moment the other died, and no request.
    await sibling.expect("P", timeout=1)
    with pytest.raises(ticketing_client.NoConnectionError):
        await broker.acquire("k2", wait=0, lease=1)
    await asyncio.wait_for(sibling.eof.wait(), 2)
    assert [line for line in sibling.lines if line.startswith("A ")] == []
    assert time.monotonic() - t0 < 2
    await broker.close()
    await servers[0].stop()


async def test_a_sibling_that_answers_its_ping_takes_requests_again() -> None:
    servers, broker, sibling = await silent_on_the_carrier()
    await sibling.expect("P", timeout=1)
    # Suspect until it hears from the server (a lost flow, not a stopped server): nothing goes to it meanwhile.
    with pytest.raises(ticketing_client.NoConnectionError):
        await broker.acquire("k2", wait=0, lease=1)
    sibling.send("P")
    deadline = time.monotonic() + 2
    while True:
        acquire = asyncio.ensure_future(broker.acquire("k2", wait=0, lease=1))
        await asyncio.wait([acquire], timeout=0.05)
        if not (acquire.done() and isinstance(acquire.exception(), ticketing_client.NoConnectionError)):
            break
        assert time.monotonic() < deadline, "the sibling took no request within 2 s of its pong"
        await asyncio.sleep(0.01)
    await sibling.expect("A k2 0 1")
    sibling.send("A 9 k2")
    assert (await acquire).token == 9
    await broker.close()
    await servers[0].stop()


async def test_an_idle_ping_in_flight_gets_the_busy_pong_deadline_once_a_request_waits_on_it() -> None:
    # The idle ping's own deadline is a minute away; the request that comes while it is in flight makes
    # its pong due by the busy deadline from then on (it waited out what was left of the idle one).
    timing.idle_ping = 0.1
    timing.pong_timeout = 60
    timing.busy_ping = 0.2
    timing.busy_pong_timeout = 0.3
    timing.reply_grace = 60
    timing.tick = 0.02
    timing.reconnect = 60
    s = await FakeServer().start()
    broker = AsyncTicketBroker([s.address, refused_address()])
    a = await s.accept_greeted()
    await broker.wait_ready(2)
    await a.expect("P", timeout=2)  # never answered: the server hangs from here on
    t0 = time.monotonic()
    with pytest.raises(ticketing_client.IndeterminateError):
        await asyncio.wait_for(broker.acquire("k", wait=0, lease=1), 5)
    took = time.monotonic() - t0
    assert took < 1.5, f"given up {took:.2f} s after the request"
    await broker.close()
    await s.stop()


async def test_a_connection_only_redirected_to_a_silent_server_goes_back_to_its_own_address_at_once() -> None:
    timing.busy_ping = 0.2
    timing.busy_pong_timeout = 1.0
    timing.idle_ping = 60
    timing.pong_timeout = 60
    timing.tick = 0.02
    timing.reconnect = 60
    a = await FakeServer().start()
    b = await FakeServer().start()
    broker = AsyncTicketBroker([a.address, b.address])
    direct = await a.accept_greeted("a")
    first_at_b = await b.accept()
    await first_at_b.expect("H 1")
    first_at_b.send(f"M {a.address}")
    redirected = await a.accept_greeted("a")
    await broker.wait_ready(2)
    await asyncio.sleep(0.05)
    # Round-robin alternates: put the acquire that meets the silence on a's own connection, so the
    # redirected one is the idle sibling.
    acquire = asyncio.ensure_future(broker.acquire("k0", wait=0, lease=1))
    carrier = await next_line([direct, redirected], "A k0 0 1")
    carrier.send("A 1 k0")
    await acquire
    if carrier is direct:
        acquire = asyncio.ensure_future(broker.acquire("k1", wait=0, lease=1))
        await redirected.expect("A k1 0 1")
        redirected.send("A 1 k1")
        await acquire
    # a is silent from here on.
    t0 = time.monotonic()
    lost = asyncio.ensure_future(broker.acquire("k", wait=0, lease=1))
    await direct.expect("A k 0 1")
    with pytest.raises(ticketing_client.IndeterminateError):
        await asyncio.wait_for(lost, 3)  # busy ping after 0.2 s, no pong within 1 s
    died = time.monotonic()
    # The redirected slot dials b at once, not after its own 1 s pong deadline.
    again = await b.accept(timeout=0.6)
    await again.greet("b")
    assert time.monotonic() - died < 0.6
    await broker.close()
    await a.stop()
    await b.stop()
