"""``AsyncTicketBroker``: the asyncio face, and the core the blocking face runs on.

Acquire and release follow CLIENT.md to the letter: never re-send an acquire
whose outcome is unknown, never call an unanswered release a success, and
never hand out a ticket without the lease the caller asked to work with.
Everything here runs on one event loop (the caller's, or the blocking face's
background thread).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Coroutine
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Callable, Generator, Literal, Optional, Sequence, TypeVar, Union

from ._connection import Connection, Outcome
from ._options import (
    AcquireRequest,
    Seconds,
    TlsOption,
    check_acquire,
    check_addresses,
    check_key,
    check_lease,
    check_timeout,
    check_token,
    hello_line,
    resolve_option,
    ssl_context,
)
from ._pool import Accept, ConnectionState, Pool, PoolListener
from ._timing import conservative_lease, now, timing
from ._wire import Reply, Request, format_request
from .errors import (
    CapacityError,
    ClosedError,
    IndeterminateError,
    InsufficientLeaseError,
    KeyPermissionError,
    LeaseEndedError,
    LockTimeoutError,
    ProtocolError,
    ReleasedError,
    ReleaseFailedError,
)

_T = TypeVar("_T")
ReleaseResult = Literal["released", "not-held"]
ErrorHandler = Callable[[BaseException], None]


@dataclass(frozen=True)
class ConnectionEvent:
    """A change of one connection, as ``on_connection_event`` hears it.

    ``connected``: a connection became usable (its ``H`` answered); ``node_name`` is the server's name.
    ``disconnected``: a usable connection ended; ``error`` is why (None for a redirect, our own
    half-close after a cancellation, or ``close()``). ``redirected``: a node answered ``M``; ``to`` is
    the address it named (None for ``M -``). ``address`` is where the connection was, ``configured``
    the address of its slot (they differ after a redirect).
    """

    kind: Literal["connected", "disconnected", "redirected"]
    address: str
    configured: str
    node_name: Optional[str] = None
    error: Optional[BaseException] = None
    to: Optional[str] = None


ConnectionEventHandler = Callable[[ConnectionEvent], None]


@dataclass(frozen=True)
class BrokerState:
    """``broker.state``: a snapshot of the broker and its connections."""

    #: ``close()`` was called.
    closed: bool
    #: How many connections are usable now.
    usable: int
    #: One entry per connection slot (two for a single address), in configured order.
    connections: tuple[ConnectionState, ...]

log = logging.getLogger("ticketing_client")


class AsyncTicket:
    """A granted lock. Its lease is counted conservatively from the moment the
    acquire was written, so ``remaining()`` and ``lease_ended`` never claim
    more time than the server gave."""

    def __init__(
        self, broker: AsyncTicketBroker, key: str, token: int, lease_ends_at: float, lease: int, keep_alive: bool = False
    ) -> None:
        #: The key this ticket holds.
        self.key = key
        #: The fencing token (exact u64): pass it to the protected resource with every write.
        self.token = token
        self._broker = broker
        self._lease_ends_at = lease_ends_at
        self._extending = asyncio.Lock()
        self._lease_over = False
        self._releasing: Optional[asyncio.Future[ReleaseResult]] = None
        #: Set when the conservative lease end is reached (not after a release).
        self.lease_ended = asyncio.Event()
        self._listeners: list[Callable[[], None]] = []
        self._loop = asyncio.get_running_loop()
        self._timer: Optional[asyncio.TimerHandle] = None
        self._arm_lease_timer()
        #: The lease (s) last granted or extended to: what the keep-alive extends to.
        self._lease = lease
        #: Extends itself at one third of the lease (the acquire's ``keep_alive``).
        self._keep_alive = keep_alive
        self._keep_alive_timer: Optional[asyncio.TimerHandle] = None
        if keep_alive:
            # The lease began when the acquire was written.
            self._schedule_keep_alive(lease_ends_at - conservative_lease(lease))

    def _arm_lease_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_at(self._loop.time() + max(0.0, self._lease_ends_at - now()), self._on_lease_end)

    def _on_lease_end(self) -> None:
        # A timer may fire a fraction of a millisecond early: from here on the lease counts as over.
        self._timer = None
        self._end_lease()

    def _end_lease(self) -> None:
        if self._lease_over:
            return
        self._lease_over = True
        self._stop_keep_alive()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.lease_ended.set()
        for fn in self._listeners:
            fn()

    async def extend(self, lease: Seconds) -> float:
        """Extends this grant to ``lease`` seconds (rounded up, 1..250) from when the server receives
        the request (it may shorten it too); returns the new conservative remaining time.

        Sends ``X key token lease`` on any usable connection, re-sent on another like a release, until
        5 s after the call or the conservative lease end, whichever comes first. While it is out the
        ticket counts with the earlier of its old end and the new one (the server may apply it at
        once); on ``X`` the new lease counts from the moment the answered request was written (never
        from the reply), and ``lease_ended`` moves with it. Raises ``LeaseEndedError`` (and sets
        ``lease_ended``) on ``G`` (the grant is gone) or when the lease ended before a reply;
        ``IndeterminateError`` when the 5 s passed without a final reply (the earlier end stays);
        ``ReleasedError`` after ``release()``; ``KeyPermissionError`` for ``E perm``. Extensions of
        one ticket run one after another.
        """
        seconds = check_lease(lease)
        async with self._extending:
            return await self._extend_now(seconds)

    async def _extend_now(self, seconds: int) -> float:
        if self._releasing is None and self.remaining() <= 0:
            self._end_lease()  # paused past the end before the lease timer could run: over now, nothing sent
        self.raise_if_ended()
        new = conservative_lease(seconds)
        called_at = now()
        window_end = called_at + timing.release_window
        deadline = min(window_end, self._lease_ends_at, called_at + new)
        line = format_request(Request("X", key=self.key, token=self.token, lease=seconds))

        def first_send(sent_at: float) -> None:
            self._move_end(min(self._lease_ends_at, sent_at + new))  # a shorter lease counts at once

        try:
            reply, sent_at = await self._broker._until_answered("X", self.key, line, deadline, first_send)
        except _NoFinalReply as err:
            if self._releasing is not None:
                raise ReleasedError(self.key, f"{self.key} (token {self.token}) was released while it was being extended") from None
            if self.remaining() <= 0 or deadline < window_end:
                self._end_lease()
                raise LeaseEndedError(
                    self.key, f"the lease of {self.key} (token {self.token}) ended before its extension was confirmed"
                ) from err.cause
            raise IndeterminateError(
                self.key,
                f"no reply to the extension of {self.key} (token {self.token}) in time; the ticket counts with the earlier end",
                cause=err.cause,
            ) from None
        if self._releasing is not None:
            raise ReleasedError(self.key, f"{self.key} (token {self.token}) was released while it was being extended")
        if reply.op == "G":
            self._end_lease()
            raise LeaseEndedError(self.key, f"{self.key} (token {self.token}) is no longer held (G): its lease ran out or it was released")
        self._move_end(sent_at + new)
        if self.remaining() <= 0:
            self._end_lease()
            raise LeaseEndedError(self.key, f"the lease of {self.key} (token {self.token}) has ended")
        self._lease = seconds
        if self._keep_alive:
            self._schedule_keep_alive(sent_at)
        return self.remaining()

    def _move_end(self, end: float) -> None:
        if self._lease_over:
            return
        self._lease_ends_at = end
        self._arm_lease_timer()

    def _schedule_keep_alive(self, start: float) -> None:
        """Keep-alive: extend once a third of the lease that began at ``start`` (a write) has passed."""
        self._stop_keep_alive()
        if self._lease_over or self._releasing is not None:
            return
        self._keep_alive_timer = self._loop.call_later(max(0.0, start + self._lease / 3 - now()), self._keep_alive_now)

    def _stop_keep_alive(self) -> None:
        if self._keep_alive_timer is not None:
            self._keep_alive_timer.cancel()
            self._keep_alive_timer = None

    def _keep_alive_now(self) -> None:
        """Extends to the current lease; an answered extension schedules the next (``_extend_now``)."""
        self._keep_alive_timer = None
        if self._releasing is not None or self._lease_over:
            return

        def done(f: asyncio.Future[float]) -> None:
            # No final reply in its window: again at once while the lease runs (the signal still fires
            # at the conservative end if none gets through). Anything else (extended, lease ended,
            # released, closed, refused): done; the ticket says so.
            if not f.cancelled() and isinstance(f.exception(), IndeterminateError):
                self._keep_alive_now()

        self._broker._track(self.extend(self._lease)).add_done_callback(done)

    def remaining(self) -> float:
        """Seconds of lease left, counted from when the acquire was sent; 0 once it has run out."""
        return 0.0 if self._lease_over else max(0.0, self._lease_ends_at - now())

    @property
    def released(self) -> bool:
        """True once ``release()`` was called."""
        return self._releasing is not None

    def raise_if_ended(self) -> None:
        """Raises ``ReleasedError`` after ``release()``, ``LeaseEndedError`` once the conservative lease
        is over; else returns. Call it before each step of long work (the fence still decides)."""
        if self._releasing is not None:
            raise ReleasedError(self.key, f"{self.key} (token {self.token}) was released")
        if self.remaining() <= 0:
            raise LeaseEndedError(self.key, f"the lease of {self.key} (token {self.token}) has ended")

    def release(self) -> asyncio.Future[ReleaseResult]:
        """Releases exactly this grant: ``"released"`` (``R``) or ``"not-held"`` (``N``: not current, e.g.
        the lease ran out). Raises ``ReleaseFailedError`` when no attempt got a final reply within 5 s.
        Calling it again returns the first call's future."""
        if self._releasing is None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._stop_keep_alive()
            self._releasing = asyncio.ensure_future(self._broker._release_ticket(self.key, self.token))
        return self._releasing

    async def __aenter__(self) -> AsyncTicket:
        return self

    async def __aexit__(
        self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        await self.dispose()

    async def dispose(self) -> None:
        """A bounded best-effort release that never raises; failures go to the broker's ``on_error``."""
        if self._releasing is not None:
            return
        try:
            await asyncio.shield(self.release())
        except asyncio.CancelledError:
            # The release goes on in the background (tracked by the broker); the caller's cancellation stands.
            raise
        except Exception as err:  # noqa: BLE001 - reported, never raised from a context exit
            self._broker._report(err)

    def __repr__(self) -> str:
        return f"<AsyncTicket key={self.key!r} token={self.token} remaining={self.remaining():.3f}s>"


class AcquireCall(Coroutine[Any, Any, AsyncTicket]):
    """What ``acquire()`` returns: a coroutine (await it, or hand it to ``asyncio.create_task``,
    ``TaskGroup.create_task``, ``asyncio.wait_for``) that is also an async context manager
    (``async with broker.acquire(...) as ticket:`` releases on exit). Like any coroutine it runs once:
    awaiting it a second time raises ``RuntimeError`` and sends nothing."""

    __slots__ = ("_coro", "_ticket")

    def __init__(self, coro: Coroutine[Any, Any, AsyncTicket]) -> None:
        self._coro = coro
        self._ticket: Optional[AsyncTicket] = None

    def __await__(self) -> Generator[Any, None, AsyncTicket]:
        return self._coro.__await__()

    def send(self, value: Any) -> Any:
        return self._coro.send(value)

    def throw(self, *args: Any) -> Any:
        return self._coro.throw(*args)

    def close(self) -> None:
        self._coro.close()

    async def __aenter__(self) -> AsyncTicket:
        self._ticket = await self._coro
        return self._ticket

    async def __aexit__(
        self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        if self._ticket is not None:
            await self._ticket.dispose()


class _NoFinalReply(Exception):
    """A retried request (release, extension) got no final reply by its deadline."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class AsyncTicketBroker:
    """Connections to a Ticketing server (or cluster) for one event loop.

    Create it inside a running loop (``async with AsyncTicketBroker("127.0.0.1:5225") as broker:``);
    it starts connecting at once: one connection per address, two when only one is given.
    Raises ``InvalidArgumentError`` for a bad address or option.
    """

    def __init__(
        self,
        addresses: Union[str, Sequence[str]],
        *,
        token: Optional[str] = None,
        tls: Optional[TlsOption] = None,
        on_error: Optional[ErrorHandler] = None,
        on_connection_event: Optional[ConnectionEventHandler] = None,
    ) -> None:
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "AsyncTicketBroker must be created inside a running event loop; use TicketBroker in blocking code"
            ) from None
        listed, url_token, url_tls = check_addresses(addresses)
        token = resolve_option("token", token, url_token)
        hello = hello_line(token)
        ctx = ssl_context(resolve_option("tls", tls, url_tls) or "off")
        self._on_connection_event = on_connection_event
        self._pool = Pool(listed, hello, ctx, _Events(self))
        self._on_error = on_error
        self._closing: Optional[asyncio.Task[None]] = None
        #: Acquires waiting for a reply: close() fails them.
        self._acquiring: set[asyncio.Future[Outcome]] = set()
        #: Releases in flight (explicit and compensating): close() waits for them.
        self._releases: set[asyncio.Future[Any]] = set()
        #: Extensions in flight: close() ends each at once with ClosedError (it waits for releases only).
        self._extensions: set[Callable[[], None]] = set()

    async def __aenter__(self) -> AsyncTicketBroker:
        return self

    async def __aexit__(
        self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        await self.close()

    async def wait_ready(self, timeout: Seconds) -> None:
        """Returns once a connection is usable (its ``H`` answered); raises ``NoConnectionError`` or
        ``AuthError`` after ``timeout`` seconds."""
        t = check_timeout("timeout", timeout)
        self._check_open()
        await self._pool.wait_ready(t)

    def acquire(
        self, key: str, *, wait: Seconds, lease: Seconds, min_work: Seconds = 0, keep_alive: bool = False
    ) -> AcquireCall:
        """Acquires ``key``: ``ticket = await broker.acquire(...)`` or ``async with broker.acquire(...) as ticket:``.

        ``wait`` 0..255 s (0: one attempt without queueing), ``lease`` 1..250 s, ``min_work`` 0..lease:
        each rounded up to whole seconds. ``keep_alive=True``: the ticket extends itself to ``lease``
        at every third of it while held (see ``AsyncTicket.extend``). Cancelling the awaiting task
        aborts: before the write nothing is sent; after it the connection is half-closed (over TLS the
        acquire stays queued on the server instead) and a late grant released by its token.
        Raises ``InvalidArgumentError`` at once for a bad argument.
        """
        req = check_acquire(key, wait, lease, min_work)
        return AcquireCall(self._acquire(req, keep_alive))

    @property
    def state(self) -> BrokerState:
        """A snapshot of the connections: what each slot is doing now, and why the last one failed."""
        conns = tuple(self._pool.snapshot())
        return BrokerState(self._closing is not None, sum(1 for c in conns if c.state == "ready"), conns)

    async def release(self, key: str, token: int) -> ReleaseResult:
        """Releases exactly ``token`` of ``key`` (what ``ticket.release()`` does), for a token kept
        elsewhere: retried on any connection until 5 s after the call."""
        check_key(key)
        check_token(token)
        return await self._release_ticket(key, token)

    async def close(self) -> None:
        """Fails acquires in progress and ``wait_ready`` calls with ``ClosedError`` (half-closing the
        connections those acquires wait on, releasing a grant that still arrives), waits (at most 5 s)
        for that and for releases in flight, then closes every connection. Tickets still held are left
        to their leases."""
        if self._closing is None:
            self._closing = self._loop.create_task(self._close())
        await asyncio.shield(self._closing)

    async def _close(self) -> None:
        closed = ClosedError("the broker was closed")
        self._pool.reject_waiters(closed)
        for end_extension in list(self._extensions):
            end_extension()
        # Like a cancellation: each acquire waiting on the server fails, and its connection is
        # half-closed so the server drops the waiter; a grant that crossed the FIN is released by its
        # exact token (on a connection the pool still keeps up).
        for fut in list(self._acquiring):
            if not fut.done():
                fut.set_exception(closed)
        await asyncio.sleep(0)  # let those acquires run their abort path
        # Until those connections are closed by the server and every release (compensations
        # included) is settled, at most the release window.
        deadline = now() + timing.release_window
        while (self._releases or self._pool.draining) and now() < deadline:
            left = deadline - now()
            if self._releases:
                await asyncio.wait(list(self._releases), timeout=min(0.02, left))
            else:
                await asyncio.sleep(min(0.02, left))
        self._pool.close()

    @property
    def closed(self) -> bool:
        return self._closing is not None

    # --- internals ------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closing is not None:
            raise ClosedError("the broker was closed")

    def _report(self, error: BaseException) -> None:
        """A failure nobody awaits (a release on context exit, a compensating release)."""
        if self._on_error is not None:
            try:
                self._on_error(error)
                return
            except Exception:  # noqa: BLE001 - a broken handler must not break the broker
                log.exception("ticketing on_error handler raised")
        log.warning("%s", error)

    def _notify(self, event: ConnectionEvent) -> None:
        """A connection-state event; a handler that raises is reported, never let into the connection code."""
        if self._on_connection_event is None:
            return
        try:
            self._on_connection_event(event)
        except Exception as err:  # noqa: BLE001
            self._report(err)

    async def _acquire(self, req: AcquireRequest, keep_alive: bool = False) -> AsyncTicket:
        self._check_open()
        conn = self._pool.pick()
        if conn is None:
            raise self._pool.not_ready_error()
        # The wait that is left for a re-send (a step-down, or dropped after another acquire's abort).
        wait_ends_at = now() + req.wait
        wait = req.wait
        key = req.key
        step_downs = 0
        while True:
            outcome, sent_at = await self._attempt(conn, req, wait)
            accept: Optional[Accept] = None
            if outcome.kind == "lost":
                err = outcome.error
                if isinstance(err, KeyPermissionError):
                    raise KeyPermissionError(f"acquire of {key}: {err}", cause=err)
                raise IndeterminateError(
                    key, f"the acquire of {key} may have reached the server but its reply was lost: {err}", cause=err
                )
            if outcome.kind == "reply":
                reply = outcome.reply
                assert reply is not None
                if reply.op == "A":
                    return self._ticket_from(req, reply.token, sent_at, keep_alive)
                if reply.op == "B":
                    raise CapacityError(key, f"the server is at a limit and refused {key} (B); nothing was queued or granted")
                if reply.op != "T":
                    raise ProtocolError(f"unexpected reply {reply.op} to an acquire")
                # A T well before the wait could have run out: the node stepped down; nothing was granted.
                step_downs += 1
                if now() >= sent_at + wait - timing.early_timeout or step_downs > timing.max_step_down_resends:
                    raise LockTimeoutError(key, f"{key} was not granted within {req.wait} s")
                # Not to that node again unless it came back: it is closing all its connections.
                node, stepped_down_at = conn.node_name, now()

                def accept_other(c: Connection) -> bool:
                    return c.node_name != node or (c.ready_since or 0.0) > stepped_down_at

                accept = accept_other
            # Nothing was granted ("dropped" by the server after our FIN, "unsent", or an early T):
            # re-send, with the wait that is left, on another usable connection.
            next_conn = await self._pool.pick_by(wait_ends_at, accept, stop=lambda: self._closing is not None)
            self._check_open()  # close() during the search: CLOSED, nothing re-sent
            if next_conn is None:
                if req.wait == 0:
                    raise self._pool.not_ready_error()
                raise LockTimeoutError(key, f"{key} was not granted within {req.wait} s")
            conn = next_conn
            # Rounded down: a re-sent acquire never waits past the caller's wait.
            wait = max(0, math.floor(wait_ends_at - now()))

    async def _attempt(self, conn: Connection, req: AcquireRequest, wait: int) -> tuple[Outcome, float]:
        """Sends one ``A`` and waits for its outcome.

        On cancellation of the awaiting task, or close(), after the write: half-close the connection
        (the server drops our waiter) and release a grant that still arrives for it. Before the write
        (still queued in this loop iteration): take the request back, nothing is sent.
        """
        fut: asyncio.Future[Outcome] = self._loop.create_future()

        def settle(outcome: Outcome) -> None:
            if not fut.done():
                fut.set_result(outcome)

        line = format_request(Request("A", key=req.key, wait=wait, lease=req.lease))
        pending = conn.send("A", req.key, line, wait, settle)
        self._acquiring.add(fut)
        try:
            return await fut, pending.sent_at
        except BaseException:
            answered = fut.done() and not fut.cancelled() and fut.exception() is None
            if answered:
                # The reply came, but the task was cancelled before it could run on: a grant is released.
                outcome = fut.result()
                if outcome.kind == "reply" and outcome.reply is not None and outcome.reply.op == "A":
                    self._compensate(req.key, outcome.reply.token)
            elif not conn.take_back(pending):
                # Possibly written: a grant that still comes for it is released by its token.
                def compensate(outcome: Outcome) -> None:
                    if outcome.kind == "reply" and outcome.reply is not None and outcome.reply.op == "A":
                        self._compensate(req.key, outcome.reply.token)

                pending.settle = compensate
                # FIN, so the server drops our waiter. asyncio cannot half-close TLS: closing would make
                # every other acquire on the shared connection INDETERMINATE, so the acquire stays
                # queued there instead (the server answers it by its wait at the latest).
                if conn.can_half_close:
                    conn.half_close()
            raise
        finally:
            self._acquiring.discard(fut)

    def _ticket_from(self, req: AcquireRequest, token: int, sent_at: float, keep_alive: bool = False) -> AsyncTicket:
        """A grant becomes a ticket only with positive conservative lease left, and at least ``min_work``."""
        lease_ends_at = sent_at + conservative_lease(req.lease)
        remaining = lease_ends_at - now()
        if remaining <= 0 or remaining < req.min_work or self._closing is not None:
            self._compensate(req.key, token)
            if self._closing is not None:
                raise ClosedError("the broker was closed")
            raise InsufficientLeaseError(req.key, token, remaining, req.min_work)
        return AsyncTicket(self, req.key, token, lease_ends_at, req.lease, keep_alive)

    def _compensate(self, key: str, token: int) -> None:
        """Releases a grant nobody will use, in the background; a failure goes to ``on_error``."""
        fut = self._track(self._release_loop(key, token))

        def done(f: asyncio.Future[ReleaseResult]) -> None:
            if not f.cancelled() and f.exception() is not None:
                self._report(f.exception())  # type: ignore[arg-type]

        fut.add_done_callback(done)

    async def _release_ticket(self, key: str, token: int) -> ReleaseResult:
        self._check_open()
        return await self._track(self._release_loop(key, token))

    def _track(self, coro: Coroutine[Any, Any, _T]) -> asyncio.Future[_T]:
        """Runs a release (or extension) as a task kept in the set close() waits for, until it settles."""
        task: asyncio.Future[_T] = self._loop.create_task(coro)
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)
        return task

    async def _release_loop(self, key: str, token: int) -> ReleaseResult:
        """``R key token`` until a final reply or 5 s after the start (see ``_until_answered``)."""
        line = format_request(Request("R", key=key, token=token))
        try:
            reply, _ = await self._until_answered("R", key, line, now() + timing.release_window)
        except _NoFinalReply as err:
            raise ReleaseFailedError(key, token, cause=err.cause) from None
        return "released" if reply.op == "R" else "not-held"

    async def _until_answered(
        self,
        op: Literal["R", "X"],
        key: str,
        line: bytes,
        deadline: float,
        on_first_send: Optional[Callable[[float], None]] = None,
    ) -> tuple[Reply, float]:
        """Sends ``line`` until a final reply or ``deadline``; returns it and when its attempt was written.

        Re-sent on another usable connection when the one it went on fails (every 200 ms while none
        is usable), and also when it stays unanswered for 500 ms (a silent connection must not use up
        the window): the same exact token, so a duplicate is harmless. The first final reply wins;
        later replies are matched and ignored. ``E perm`` answering it raises ``KeyPermissionError``
        at once (every connection would refuse it); no final reply by ``deadline``: ``_NoFinalReply``.
        """
        result: asyncio.Future[tuple[Reply, float]] = self._loop.create_future()
        in_flight: set[Connection] = set()
        last_error: list[BaseException] = []
        wake: list[asyncio.Future[None]] = []

        def poke() -> None:
            if wake and not wake[0].done():
                wake[0].set_result(None)

        def on_close() -> None:
            if not result.done():
                result.set_exception(ClosedError("the broker was closed"))
            poke()

        def on_outcome(conn: Connection, sent_at: float, outcome: Outcome) -> None:
            if outcome.kind == "reply" and outcome.reply is not None:
                if not result.done():
                    result.set_result((outcome.reply, sent_at))
            elif isinstance(outcome.error, KeyPermissionError):
                if not result.done():
                    result.set_exception(
                        KeyPermissionError(f"{op} {key} was refused: {outcome.error}; nothing changed", cause=outcome.error)
                    )
            else:
                in_flight.discard(conn)
                if outcome.error is not None:
                    last_error.append(outcome.error)
            poke()

        if op == "X":
            self._check_open()
            self._extensions.add(on_close)
        try:
            while not result.done():
                left = deadline - now()
                if left <= 0 or self._pool.closed:
                    break
                conn = self._pool.pick(lambda c: c not in in_flight)
                if conn is not None:
                    in_flight.add(conn)
                    c = conn
                    holder: list[float] = []
                    p = conn.send(op, key, line, 0, lambda o: on_outcome(c, holder[0], o))
                    holder.append(p.sent_at)
                    if on_first_send is not None:
                        on_first_send(p.sent_at)
                        on_first_send = None
                    pause = timing.release_resend
                else:
                    pause = timing.retry
                wake[:] = [self._loop.create_future()]
                timer = self._loop.call_later(min(pause, left), poke)
                try:
                    await wake[0]
                finally:
                    timer.cancel()
            if result.done():
                return result.result()
            raise _NoFinalReply(last_error[-1] if last_error else self._pool.not_ready_error())
        finally:
            self._extensions.discard(on_close)


class _Events(PoolListener):
    """Turns the pool's news into the broker's connection-state events."""

    def __init__(self, broker: AsyncTicketBroker) -> None:
        self._broker = broker

    def connected(self, address: str, configured: str, node_name: str) -> None:
        self._broker._notify(ConnectionEvent("connected", address, configured, node_name=node_name))

    def disconnected(self, address: str, configured: str, error: Optional[BaseException]) -> None:
        self._broker._notify(ConnectionEvent("disconnected", address, configured, error=error))

    def redirected(self, from_address: str, to: Optional[str], configured: str) -> None:
        self._broker._notify(ConnectionEvent("redirected", from_address, configured, to=to))
