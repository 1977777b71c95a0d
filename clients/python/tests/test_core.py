"""The CLIENT.md rules, one by one, against a scripted fake server."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

import ticketing_client
from ticketing_client import AsyncTicketBroker
from ticketing_client._timing import timing

from fake import FakeConn, FakeServer


async def setup(token: str | None = None, addresses: int = 1) -> tuple[list[FakeServer], AsyncTicketBroker, list[FakeConn]]:
    servers = [await FakeServer().start() for _ in range(addresses)]
    addr: str | list[str] = servers[0].address if addresses == 1 else [s.address for s in servers]
    broker = AsyncTicketBroker(addr, token=token)
    conns = []
    if addresses == 1:
        conns = [await servers[0].accept_greeted("n1"), await servers[0].accept_greeted("n1")]
    else:
        conns = [await s.accept_greeted(f"n{i}") for i, s in enumerate(servers)]
    await broker.wait_ready(2)
    await asyncio.sleep(0.05)  # both ready
    return servers, broker, conns


async def next_line(conns: list[FakeConn], prefix: str) -> FakeConn:
    """Whichever connection the client used next."""
    tasks = {asyncio.ensure_future(c.expect(prefix)): c for c in conns}
    done, pending = await asyncio.wait(tasks, timeout=3, return_when=asyncio.FIRST_COMPLETED)
    for t in pending:
        t.cancel()
    assert done, f"no {prefix!r} on any connection"
    t = done.pop()
    t.result()
    return tasks[t]


async def test_hello_first_with_the_token_and_two_connections_for_one_address() -> None:
    s = await FakeServer().start()
    broker = AsyncTicketBroker(s.address, token="s3cret")
    a, b = await s.accept(), await s.accept()
    assert await a.expect() == "H 1 s3cret"
    assert await b.expect() == "H 1 s3cret"
    with pytest.raises(ticketing_client.NoConnectionError):
        await broker.acquire("k", wait=0, lease=1)  # no H reply yet: nothing is usable
    await a.nothing(0.1)
    a.send("H 1 x")
    await broker.wait_ready(1)
    await broker.close()
    await s.stop()


async def test_one_connection_per_address_and_round_robin() -> None:
    servers, broker, conns = await setup(addresses=3)
    used = []
    for i in range(6):
        fut = asyncio.ensure_future(broker.acquire(f"k{i}", wait=0, lease=5))
        c = await next_line(conns, f"A k{i} 0 5")
        used.append(conns.index(c))
        c.send(f"T k{i}")
        with pytest.raises(ticketing_client.LockTimeoutError):
            await fut
    assert sorted(used[:3]) == [0, 1, 2] and used[3:] == used[:3]
    await broker.close()


async def test_invalid_arguments_are_rejected_before_anything_is_sent() -> None:
    servers, broker, conns = await setup()
    bad = [
        dict(key="a b", wait=1, lease=1),
        dict(key="", wait=1, lease=1),
        dict(key="x" * 251, wait=1, lease=1),
        dict(key="k", wait=256, lease=1),
        dict(key="k", wait=1, lease=0),
        dict(key="k", wait=1, lease=251),
        dict(key="k", wait=-1, lease=1),
        dict(key="k", wait=1, lease=2, min_work=2.5),
        dict(key="k", wait=1, lease=1.5, min_work=2.001),
        dict(key="k", wait=True, lease=2),
    ]
    for b in bad:
        with pytest.raises(ticketing_client.InvalidArgumentError) as info:
            broker.acquire(b.pop("key"), **b)  # type: ignore[arg-type]
        assert info.value.code == "INVALID_ARGUMENT"
    for c in conns:
        await c.nothing(0.1)
    # Rounded up: 0.5 s lease is 1 s, 254.2 s wait is 255.
    fut = asyncio.ensure_future(broker.acquire("k", wait=254.2, lease=0.5))
    c = await next_line(conns, "A k 255 1")
    c.send("B k")
    with pytest.raises(ticketing_client.CapacityError):
        await fut
    with pytest.raises(ticketing_client.InvalidArgumentError):
        AsyncTicketBroker("no host")
    with pytest.raises(ticketing_client.InvalidArgumentError):
        AsyncTicketBroker("127.0.0.1:1", token="a b")
    await broker.close()


async def test_capacity_is_at_once_and_a_grant_is_a_ticket() -> None:
    servers, broker, conns = await setup()
    fut = asyncio.ensure_future(broker.acquire("k", wait=5, lease=30))
    c = await next_line(conns, "A k 5 30")
    c.send("B k")
    with pytest.raises(ticketing_client.CapacityError):
        await fut
    for x in conns:
        await x.nothing(0.2)  # never retried
    fut = asyncio.ensure_future(broker.acquire("k", wait=5, lease=30))
    c = await next_line(conns, "A k 5 30")
    c.send("A 18446744073709551615 k")
    ticket = await fut
    assert ticket.token == 2**64 - 1 and ticket.key == "k"
    assert 29 < ticket.remaining() <= 30
    rel = asyncio.ensure_future(ticket.release())
    c2 = await next_line(conns, "R k 18446744073709551615")
    c2.send("R k")
    assert await rel == "released"
    assert await ticket.release() == "released"  # the first call's result
    await broker.close()


async def test_min_work_refusal_releases_that_exact_token() -> None:
    servers, broker, conns = await setup()
    fut = asyncio.ensure_future(broker.acquire("k", wait=5, lease=2, min_work=1.9))
    c = await next_line(conns, "A k 5 2")
    await asyncio.sleep(0.2)
    c.send("A 77 k")
    with pytest.raises(ticketing_client.InsufficientLeaseError) as info:
        await fut
    assert info.value.token == 77
    c2 = await next_line(conns, "R k 77")
    c2.send("R k")
    await broker.close()


async def test_a_reset_after_the_send_is_indeterminate_and_never_re_sent() -> None:
    servers, broker, conns = await setup()
    fut = asyncio.ensure_future(broker.acquire("k", wait=5, lease=30))
    c = await next_line(conns, "A k")
    c.reset()
    with pytest.raises(ticketing_client.IndeterminateError) as info:
        await fut
    assert info.value.code == "INDETERMINATE"
    other = conns[1 - conns.index(c)]
    await other.nothing(0.5)
    await broker.close()


@pytest.mark.parametrize(
    "reply",
    ["E internal boom", "X what", "A 0 k", "T other-key", "R k", "x" * 600],
)
async def test_session_fatal_replies_close_the_connection(reply: str) -> None:
    servers, broker, conns = await setup()
    fut = asyncio.ensure_future(broker.acquire("k", wait=5, lease=30))
    c = await next_line(conns, "A k")
    c.send(reply)
    with pytest.raises(ticketing_client.IndeterminateError) as info:
        await fut
    assert isinstance(info.value.__cause__, ticketing_client.ProtocolError)
    await asyncio.wait_for(c.eof.wait(), 2)
    await broker.close()


async def test_min_work_equal_to_the_rounded_lease_is_sent_and_can_never_be_met() -> None:
    # CLIENT.md: min_work 0..rounded lease, inclusive. 1.5 s rounds up to a 2 s lease.
    servers, broker, conns = await setup()
    fut = asyncio.ensure_future(broker.acquire("k", wait=0, lease=1.5, min_work=2))
    c = await next_line(conns, "A k 0 2")
    c.send("A 78 k")
    with pytest.raises(ticketing_client.InsufficientLeaseError) as info:
        await fut
    assert info.value.token == 78
    c2 = await next_line(conns, "R k 78")
    c2.send("R k")
    await broker.close()


async def test_e_perm_is_a_permission_error() -> None:
    servers, broker, conns = await setup()
    fut = asyncio.ensure_future(broker.acquire("other/k", wait=5, lease=30))
    c = await next_line(conns, "A other/k")
    c.send("E perm key outside the prefixes")
    with pytest.raises(ticketing_client.KeyPermissionError) as info:
        await fut
    assert info.value.code == "PERMISSION"
    await broker.close()


async def test_e_perm_with_several_acquires_unanswered_makes_them_all_indeterminate() -> None:
    # The E names no key: which acquire was refused is unknown, and the other may have been granted.
    s = await FakeServer().start()
    broker = AsyncTicketBroker(s.address)
    c = await s.accept_greeted("n1")
    await broker.wait_ready(2)  # one connection greeted: every acquire goes on it
    f1 = asyncio.ensure_future(broker.acquire("other/k", wait=5, lease=30))
    f2 = asyncio.ensure_future(broker.acquire("k", wait=5, lease=30))
    assert await c.expect("A other/k") and await c.expect("A k")
    c.send("E perm key outside the prefixes")
    for fut in (f1, f2):
        with pytest.raises(ticketing_client.IndeterminateError) as info:
            await fut
        cause = info.value.__cause__
        assert isinstance(cause, ticketing_client.ProtocolError) and cause.server_code == "perm"
    await broker.close()
    await s.stop()


async def test_early_t_is_a_step_down_re_sent_once_on_another_connection_with_the_wait_left() -> None:
    servers, broker, conns = await setup(addresses=2)
    fut = asyncio.ensure_future(broker.acquire("k", wait=10, lease=30))
    c = await next_line(conns, "A k 10 30")
    await asyncio.sleep(1.1)
    c.send("T k")
    other = conns[1 - conns.index(c)]
    line = await other.expect("A k ")
    assert line == "A k 8 30"  # 10 s - 1.1 s, rounded down
    other.send("A 5 k")
    assert (await fut).token == 5
    await broker.close()


async def test_a_t_at_the_end_of_the_wait_is_a_timeout() -> None:
    servers, broker, conns = await setup()
    fut = asyncio.ensure_future(broker.acquire("k", wait=1, lease=30))
    c = await next_line(conns, "A k 1 30")
    await asyncio.sleep(1.0)
    c.send("T k")
    with pytest.raises(ticketing_client.LockTimeoutError):
        await fut
    await broker.close()


async def test_m_is_indeterminate_and_followed_at_once() -> None:
    servers, broker, conns = await setup()
    target = await FakeServer().start()
    fut = asyncio.ensure_future(broker.acquire("k", wait=5, lease=30))
    c = await next_line(conns, "A k")
    c.send(f"M {target.address}")
    with pytest.raises(ticketing_client.IndeterminateError):
        await fut
    t = await target.accept(1)  # at once, not after 3 s
    assert await t.expect() == "H 1"
    await broker.close()
    await target.stop()


async def test_at_most_three_redirects_in_a_row_then_the_configured_address() -> None:
    timing.reconnect = 0.3
    s = await FakeServer().start()
    hops = [await FakeServer().start() for _ in range(4)]
    broker = AsyncTicketBroker([s.address, hops[3].address])
    first = await s.accept()
    await first.expect("H 1")
    first.send(f"M {hops[0].address}")
    for i in range(3):
        c = await hops[i].accept(1)
        await c.expect("H 1")
        c.send(f"M {hops[i + 1].address}")
    # The fourth redirect is not followed: the slot goes back to its configured address.
    again = await s.accept(2)
    await again.expect("H 1")
    assert all(len(h.all) <= 1 for h in hops[:3])
    await broker.close()


async def test_m_dash_retries_on_the_normal_cycle() -> None:
    timing.reconnect = 0.5
    s = await FakeServer().start()
    broker = AsyncTicketBroker(s.address)
    a = await s.accept()
    await a.expect("H 1")
    t0 = time.monotonic()
    a.send("M -")
    b = await s.accept()  # the other slot's first connection
    c = await s.accept(2)
    assert time.monotonic() - t0 >= 0.4
    await broker.close()
    del b, c


async def test_cancel_after_the_send_half_closes_and_releases_a_late_grant() -> None:
    servers, broker, conns = await setup()
    task = asyncio.ensure_future(broker.acquire("k", wait=30, lease=30))
    c = await next_line(conns, "A k 30 30")
    other_acquire = None
    # A second acquire pipelined on the same connection (round-robin: the third goes to the same one).
    f2 = asyncio.ensure_future(broker.acquire("j", wait=30, lease=30))
    c2 = await next_line(conns, "A j")
    f3 = asyncio.ensure_future(broker.acquire("j2", wait=30, lease=30))
    c3 = await next_line(conns, "A j2")
    assert c3 is c and c2 is not c
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(c.eof.wait(), 2)  # FIN: the server drops our waiters
    assert c.lines[-1] == "P"  # sent with the FIN: its pong tells a drain from a crash
    c.send("P")
    c.send("A 99 k")  # a grant decided before the FIN arrived
    c.close()  # clean close after the pong: j2 was dropped, not granted
    rel = await next_line([x for x in conns if x is not c], "R k 99")
    rel.send("R k")
    # j2 is re-sent on another connection with the wait it has left.
    line = await c2.expect("A j2 ")
    assert line in ("A j2 30 30", "A j2 29 30")
    c2.send("A 7 j2")
    assert (await f3).token == 7
    f2.cancel()  # half-closes c2, which the fake never closes: close() waits for it only briefly here
    timing.release_window = 0.3
    await broker.close()
    del other_acquire


async def test_cancel_then_a_broken_connection_leaves_the_others_indeterminate() -> None:
    servers, broker, conns = await setup()
    task = asyncio.ensure_future(broker.acquire("k", wait=30, lease=30))
    c = await next_line(conns, "A k")
    asyncio.ensure_future(broker.acquire("x", wait=30, lease=30))
    await next_line(conns, "A x")
    f3 = asyncio.ensure_future(broker.acquire("j", wait=30, lease=30))
    assert await next_line(conns, "A j") is c
    task.cancel()
    await asyncio.wait_for(c.eof.wait(), 2)
    c.reset()
    with pytest.raises(ticketing_client.IndeterminateError):
        await f3
    timing.release_window = 0.3  # x's connection is half-closed by close() and the fake never closes it
    await broker.close()


async def test_cancel_before_the_write_sends_nothing() -> None:
    timing.retry = 0.05
    servers, broker, conns = await setup(addresses=2)
    # A step-down T: the re-send waits for a connection to another node; cancel it then.
    fut = asyncio.ensure_future(broker.acquire("k", wait=10, lease=30))
    c = await next_line(conns, "A k")
    other = conns[1 - conns.index(c)]
    other.close()  # the other node is gone: nothing to re-send to
    await asyncio.sleep(0.1)
    c.send("T k")
    await asyncio.sleep(0.2)
    fut.cancel()
    with pytest.raises(asyncio.CancelledError):
        await fut
    await c.nothing(0.3)
    assert not c.eof.is_set()  # no half-close: nothing was pending
    await broker.close()


async def test_release_retries_on_another_connection_and_reports_n() -> None:
    servers, broker, conns = await setup()
    rel = asyncio.ensure_future(broker.release("k", 42))
    first = await next_line(conns, "R k 42")
    # No reply within ~500 ms: also sent on the other connection.
    other = conns[1 - conns.index(first)]
    t0 = time.monotonic()
    await other.expect("R k 42", timeout=2)
    assert 0.3 < time.monotonic() - t0 < 1.5
    other.send("N k")
    assert await rel == "not-held"
    first.send("R k")  # a late reply is matched and ignored
    await asyncio.sleep(0.1)
    assert not first.eof.is_set()
    await broker.close()


async def test_release_without_a_final_reply_fails_after_the_window() -> None:
    timing.release_window = 1.0
    servers, broker, conns = await setup()
    t0 = time.monotonic()
    with pytest.raises(ticketing_client.ReleaseFailedError) as info:
        await broker.release("k", 42)
    assert 0.9 < time.monotonic() - t0 < 1.5
    assert info.value.code == "RELEASE_FAILED" and info.value.token == 42
    await broker.close()


async def test_idle_ping_and_a_missing_pong_closes_the_connection() -> None:
    timing.idle_ping = 0.3
    timing.pong_timeout = 0.5
    timing.tick = 0.05
    s = await FakeServer().start()
    broker = AsyncTicketBroker(s.address)
    a = await s.accept_greeted()
    b = await s.accept_greeted()
    await a.expect("P")
    a.send("P")
    await b.expect("P")  # b does not answer
    await asyncio.wait_for(b.eof.wait(), 2)
    assert not a.eof.is_set()
    await broker.close()


async def test_a_silent_overdue_acquire_is_indeterminate_judged_per_key_queue() -> None:
    timing.reply_grace = 0.5
    timing.tick = 0.05
    timing.idle_ping = 100
    servers, broker, conns = await setup(addresses=2)
    f1 = asyncio.ensure_future(broker.acquire("k", wait=1, lease=30))
    c = await next_line(conns, "A k 1")
    f3 = asyncio.ensure_future(broker.acquire("q", wait=0, lease=30))
    await next_line(conns, "A q")
    f2 = asyncio.ensure_future(broker.acquire("k", wait=0, lease=30))
    assert await next_line(conns, "A k 0") is c
    # k's second acquire (wait 0) waits behind the first (wait 1): not overdue at 0.5 s.
    await asyncio.sleep(0.8)
    assert not c.eof.is_set()
    with pytest.raises(ticketing_client.IndeterminateError):
        await asyncio.wait_for(f1, 2)
    with pytest.raises(ticketing_client.IndeterminateError):
        await f2
    await asyncio.wait_for(c.eof.wait(), 1)
    f3.cancel()
    await broker.close()


async def test_close_fails_pending_acquires_and_later_calls() -> None:
    servers, broker, conns = await setup()
    fut = asyncio.ensure_future(broker.acquire("k", wait=30, lease=30))
    c = await next_line(conns, "A k")
    closing = asyncio.ensure_future(broker.close())
    with pytest.raises(ticketing_client.ClosedError):
        await fut
    with pytest.raises(ticketing_client.ClosedError):
        await broker.acquire("k", wait=0, lease=1)
    await asyncio.wait_for(c.eof.wait(), 2)  # half-closed: the server drops the waiter
    c.close()
    await asyncio.wait_for(closing, 1)  # done once the server closed that connection


async def test_lease_ended_event_and_context_exit_release() -> None:
    errors: list[BaseException] = []
    s = await FakeServer().start()
    broker = AsyncTicketBroker(s.address, on_error=errors.append)
    conns = [await s.accept_greeted(), await s.accept_greeted()]
    await broker.wait_ready(1)
    fut = asyncio.ensure_future(broker.acquire("k", wait=0, lease=1))
    c = await next_line(conns, "A k 0 1")
    c.send("A 3 k")
    ticket = await fut
    await asyncio.wait_for(ticket.lease_ended.wait(), 1.5)
    assert ticket.remaining() == 0
    # async with: released on exit, errors reported, never raised.
    timing.release_window = 0.3
    async def body() -> None:
        f = broker.acquire("j", wait=0, lease=5)
        async def grant() -> None:
            c2 = await next_line(conns, "A j")
            c2.send("A 4 j")
        g = asyncio.ensure_future(grant())
        async with f as t:
            assert t.token == 4
        await g
    await body()
    assert len(errors) == 1 and isinstance(errors[0], ticketing_client.ReleaseFailedError)
    await broker.close()


async def test_reconnects_to_the_configured_address_every_3s() -> None:
    timing.reconnect = 0.4
    servers, broker, conns = await setup()
    # A usable connection that drops is retried at once (its cluster may have failed over)...
    conns[0].reset()
    t0 = time.monotonic()
    c = await servers[0].accept(2)
    assert time.monotonic() - t0 < 0.3
    await c.expect("H 1")
    c.send("H 1 fake")
    await asyncio.sleep(0.05)
    # ...once per cycle: dropped again, it waits the reconnect delay.
    c.reset()
    t0 = time.monotonic()
    c = await servers[0].accept(2)
    assert time.monotonic() - t0 >= 0.3
    await c.expect("H 1")
    await broker.close()


async def test_auth_refusal_is_reported_by_wait_ready() -> None:
    s = await FakeServer().start()
    broker = AsyncTicketBroker(s.address, token="bad")
    for _ in range(2):
        c = await s.accept()
        await c.expect("H 1 bad")
        c.send("E auth missing or wrong client token")
    with pytest.raises(ticketing_client.AuthError):
        await broker.wait_ready(0.5)
    await broker.close()


async def test_cancel_after_queueing_before_the_write_takes_the_request_back() -> None:
    servers, broker, conns = await setup()
    task = asyncio.ensure_future(broker.acquire("k", wait=10, lease=10))
    await asyncio.sleep(0)  # the task runs to its first suspension: the A is queued, not written
    queued = [c for s in broker._pool._slots if (c := s.conn) is not None and c._outbox]
    assert len(queued) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for c in conns:
        await c.nothing(0.3)  # no A, and no FIN on the healthy shared connection
        assert not c.eof.is_set()
    await broker.close()


async def test_raise_if_ended() -> None:
    servers, broker, conns = await setup()
    fut = asyncio.ensure_future(broker.acquire("k", wait=0, lease=1))
    c = await next_line(conns, "A k 0 1")
    c.send("A 3 k")
    ticket = await fut
    ticket.raise_if_ended()
    await asyncio.wait_for(ticket.lease_ended.wait(), 1.5)
    with pytest.raises(ticketing_client.LeaseEndedError):
        ticket.raise_if_ended()
    rel = ticket.release()
    with pytest.raises(ticketing_client.ReleasedError):
        ticket.raise_if_ended()
    r = await next_line(conns, "R k 3")
    r.send("N k")
    assert await rel == "not-held"
    await broker.close()


async def test_close_stops_an_acquire_looking_for_a_connection_to_re_send_on() -> None:
    timing.release_window = 1.0
    servers, broker, conns = await setup()  # both connections to node n1
    rel = asyncio.ensure_future(broker.release("z", 1))  # unanswered: close() waits for it
    await next_line(conns, "R z 1")
    fut = asyncio.ensure_future(broker.acquire("k", wait=10, lease=10))
    c = await next_line(conns, "A k 10 10")
    c.send("T k")  # early: n1 stepped down; no other node to re-send to
    await asyncio.sleep(0.3)
    assert not fut.done()
    closing = asyncio.ensure_future(broker.close())
    t0 = time.monotonic()
    with pytest.raises(ticketing_client.ClosedError):
        await asyncio.wait_for(fut, 1)
    assert time.monotonic() - t0 < 0.5
    with pytest.raises(ticketing_client.ReleaseFailedError):
        await rel
    await closing
    assert sum(1 for x in conns for line in x.lines if line.startswith("A ")) == 1


async def test_an_acquire_whose_connection_dies_before_its_write_goes_out_on_another() -> None:
    """Issue 28 defect 6: the A was queued (written two loop iterations later) when its connection
    died; nothing left, so it goes out on the other usable connection instead of INDETERMINATE."""
    servers, broker, conns = await setup(addresses=2)
    if sys.version_info >= (3, 12):
        task = asyncio.Task(broker.acquire("k", wait=0, lease=10), loop=asyncio.get_running_loop(), eager_start=True)
    else:
        task = asyncio.ensure_future(broker.acquire("k", wait=0, lease=10))
        await asyncio.sleep(0)
    queued = [s.conn for s in broker._pool._slots if s.conn is not None and s.conn._outbox]
    assert len(queued) == 1  # the A is queued on one connection, not written yet
    first = queued[0]
    assert first._transport is not None
    first._transport.abort()  # the connection dies before the flush
    other = conns[1] if first is broker._pool._slots[0].conn else conns[0]
    await other.expect("A k 0 10")
    other.send("A 9 k")
    assert (await task).token == 9
    await broker.close()
