"""Lease extension (``ticket.extend``, ``keep_alive``) against a scripted fake server: the wire is
``X key token lease`` answered ``X key`` (extended) or ``G key`` (the grant is gone)."""

from __future__ import annotations

import asyncio

import pytest

import ticketing_client
from ticketing_client._timing import timing

from test_core import next_line, setup


async def granted(lease: int = 10) -> tuple[object, object, list, ticketing_client.AsyncTicket]:  # type: ignore[type-arg]
    servers, broker, conns = await setup()
    fut = asyncio.ensure_future(broker.acquire("k", wait=0, lease=lease))
    c = await next_line(conns, f"A k 0 {lease}")
    c.send("A 7 k")
    return servers, broker, conns, await fut


async def test_extend_restarts_the_conservative_lease_from_the_write_of_x() -> None:
    _, broker, conns, ticket = await granted(lease=2)
    await asyncio.sleep(0.5)
    assert ticket.remaining() < 1.5
    fut = asyncio.ensure_future(ticket.extend(30))
    c = await next_line(conns, "X k 7 30")
    await asyncio.sleep(0.3)  # the reply comes late: the lease still counts from the write
    c.send("X k")
    await fut
    assert 29.4 - 0.5 < ticket.remaining() <= 30 * 0.98 - 0.3
    assert not ticket.lease_ended.is_set()
    await broker.close()  # type: ignore[attr-defined]


async def test_g_means_the_grant_is_gone_lease_ended_fires() -> None:
    _, broker, conns, ticket = await granted()
    fut = asyncio.ensure_future(ticket.extend(30))
    c = await next_line(conns, "X k 7 30")
    c.send("G k")
    with pytest.raises(ticketing_client.LeaseEndedError):
        await fut
    assert ticket.lease_ended.is_set() and ticket.remaining() == 0
    with pytest.raises(ticketing_client.LeaseEndedError):
        await ticket.extend(30)  # nothing sent any more
    for x in conns:
        await x.nothing(0.1)
    await broker.close()  # type: ignore[attr-defined]


async def test_extend_is_resent_on_another_connection_when_its_fails() -> None:
    _, broker, conns, ticket = await granted()
    fut = asyncio.ensure_future(ticket.extend(20))
    c = await next_line(conns, "X k 7 20")
    c.reset()
    other = [x for x in conns if x is not c][0]
    await other.expect("X k 7 20")
    other.send("X k")
    await fut
    assert ticket.remaining() > 19
    await broker.close()  # type: ignore[attr-defined]


async def test_no_final_reply_in_time_is_indeterminate_and_keeps_the_old_end() -> None:
    timing.release_window = 0.6
    _, broker, conns, ticket = await granted()
    before = ticket.remaining()
    with pytest.raises(ticketing_client.IndeterminateError):
        await ticket.extend(30)
    assert ticket.remaining() <= before
    timing.release_window = 0.1
    await broker.close()  # type: ignore[attr-defined]


async def test_extend_after_release_raises_released_and_bad_leases_are_refused() -> None:
    _, broker, conns, ticket = await granted()
    for bad in (0, 251, -1, "x"):
        with pytest.raises(ticketing_client.InvalidArgumentError):
            await ticket.extend(bad)  # type: ignore[arg-type]
    rel = ticket.release()
    c = await next_line(conns, "R k 7")
    c.send("R k")
    await rel
    with pytest.raises(ticketing_client.ReleasedError):
        await ticket.extend(10)
    await broker.close()  # type: ignore[attr-defined]


async def test_keep_alive_extends_at_a_third_of_the_lease_and_stops_on_release() -> None:
    servers, broker, conns = await setup()
    fut = asyncio.ensure_future(broker.acquire("k", wait=0, lease=3, keep_alive=True))  # type: ignore[attr-defined]
    c = await next_line(conns, "A k 0 3")
    c.send("A 7 k")
    ticket = await fut
    for _ in range(2):  # about every second
        x = await next_line(conns, "X k 7 3")
        x.send("X k")
    await asyncio.sleep(0.1)
    assert ticket.remaining() > 2.5
    rel = ticket.release()
    r = await next_line(conns, "R k 7")
    r.send("R k")
    await rel
    for x in conns:
        await x.nothing(1.3)  # no more extensions after the release
    await broker.close()  # type: ignore[attr-defined]


async def test_keep_alive_that_cannot_extend_lets_the_lease_end_at_its_conservative_end() -> None:
    servers, broker, conns = await setup()
    fut = asyncio.ensure_future(broker.acquire("k", wait=0, lease=2, keep_alive=True))  # type: ignore[attr-defined]
    c = await next_line(conns, "A k 0 2")
    c.send("A 7 k")
    ticket = await fut
    await asyncio.wait_for(ticket.lease_ended.wait(), 3)  # the X lines are never answered
    assert ticket.remaining() == 0
    timing.release_window = 0.1
    await broker.close()  # type: ignore[attr-defined]
