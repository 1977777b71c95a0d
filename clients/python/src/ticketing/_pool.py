"""The connection pool: one slot per configured address (two when only one is
given), round-robin over usable connections, ``M`` redirects, and reconnection
to the configured address on the 3 s cycle. Runs on the broker's event loop."""

from __future__ import annotations

import asyncio
import ssl
from typing import Callable, Optional

from ._connection import Connection, End
from ._timing import now, timing
from .errors import AuthError, NoConnectionError

Accept = Callable[[Connection], bool]


class _Slot:
    __slots__ = ("configured", "conn", "redirects", "reconnect", "last_error", "quick_retry_at")

    def __init__(self, configured: str) -> None:
        self.configured = configured
        self.conn: Optional[Connection] = None
        #: ``M host:port`` followed in a row (reset by a usable connection).
        self.redirects = 0
        self.reconnect: Optional[asyncio.TimerHandle] = None
        #: Why the last connection of this slot failed, for error messages.
        self.last_error: Optional[BaseException] = None
        #: When this slot last reconnected at once after a drop (at most once per reconnect cycle).
        self.quick_retry_at = float("-inf")


class Pool:
    def __init__(self, addresses: list[str], hello: bytes, ssl_context: Optional[ssl.SSLContext]) -> None:
        self._loop = asyncio.get_running_loop()
        listed = [addresses[0], addresses[0]] if len(addresses) == 1 else list(addresses)
        self._slots = [_Slot(a) for a in listed]
        self._next = 0
        self.closed = False
        self._hello = hello
        self._ssl = ssl_context
        self._ready_waiters: set[asyncio.Future[None]] = set()
        for slot in self._slots:
            self._open(slot, slot.configured)

    def pick(self, accept: Optional[Accept] = None) -> Optional[Connection]:
        """The next usable connection (that ``accept`` takes), round-robin, each slot tried once."""
        n = len(self._slots)
        for _ in range(n):
            slot = self._slots[self._next]
            self._next = (self._next + 1) % n
            conn = slot.conn
            if conn is not None and conn.usable and (accept is None or accept(conn)):
                return conn
        return None

    async def pick_by(
        self, deadline: float, accept: Optional[Accept] = None, stop: Optional[Callable[[], bool]] = None
    ) -> Optional[Connection]:
        """Like ``pick``, polling every 200 ms until ``deadline`` (monotonic s); None if none by then,
        or as soon as ``stop()`` is true."""
        while True:
            if stop is not None and stop():
                return None
            conn = self.pick(accept)
            if conn is not None or self.closed:
                return conn
            left = deadline - now()
            if left <= 0:
                return None
            await asyncio.sleep(min(timing.retry, left))

    async def wait_ready(self, timeout: float) -> None:
        """Returns once a connection is usable; raises after ``timeout`` s (AuthError if the server refused our token)."""
        if self.pick() is not None:
            return
        fut: asyncio.Future[None] = self._loop.create_future()
        self._ready_waiters.add(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.TimeoutError:
            raise self.not_ready_error(timeout) from None
        finally:
            self._ready_waiters.discard(fut)

    def not_ready_error(self, timeout: Optional[float] = None) -> Exception:
        """Why nothing is usable: the server's auth refusal if any, else the last connection failure."""
        errors = [s.last_error for s in self._slots if s.last_error is not None]
        for e in errors:
            if isinstance(e, AuthError):
                return e
        within = "" if timeout is None else f" within {timeout} s"
        addresses = ", ".join(dict.fromkeys(s.configured for s in self._slots))
        last = errors[-1] if errors else None
        detail = f": {last}" if last is not None else ""
        return NoConnectionError(f"no usable connection to {addresses}{within}{detail}", cause=last)

    @property
    def draining(self) -> bool:
        """Some connection was half-closed by us and the server has not closed it yet."""
        return any(s.conn is not None and s.conn.draining for s in self._slots)

    def reject_waiters(self, error: BaseException) -> None:
        """``wait_ready`` calls in progress fail with ``error`` at once (close(), an auth refusal)."""
        for fut in list(self._ready_waiters):
            if not fut.done():
                fut.set_exception(error)

    def close(self) -> None:
        self.closed = True
        for slot in self._slots:
            if slot.reconnect is not None:
                slot.reconnect.cancel()
                slot.reconnect = None
            if slot.conn is not None:
                slot.conn.shutdown()

    def _open(self, slot: _Slot, address: str) -> None:
        slot.reconnect = None

        def on_ready(conn: Connection) -> None:  # noqa: ARG001
            slot.redirects = 0
            slot.last_error = None
            for fut in list(self._ready_waiters):
                if not fut.done():
                    fut.set_result(None)

        def on_closed(conn: Connection, end: End) -> None:
            self._on_closed(slot, conn, end)

        slot.conn = Connection(address, self._hello, self._ssl, on_ready, on_closed)

    def _on_closed(self, slot: _Slot, conn: Connection, end: End) -> None:
        if slot.conn is not conn:
            return
        slot.conn = None
        if self.closed:
            return
        if end.kind == "failed":
            slot.last_error = end.error
            if isinstance(end.error, AuthError):
                # The server refused our token: waiting longer will not help.
                self.reject_waiters(end.error)
        if end.kind == "redirect" and end.address is not None and slot.redirects < timing.max_redirects:
            slot.redirects += 1
            self._open(slot, end.address)
            return
        # A redirect target that cannot be reached (the active it named has just died): back to the
        # configured address at once, whose node may be taking over. Counted as a redirect.
        if (
            end.kind == "failed"
            and conn.ready_since is None
            and 0 < slot.redirects < timing.max_redirects
            and conn.address != slot.configured
        ):
            slot.redirects += 1
            self._open(slot, slot.configured)
            return
        slot.redirects = 0
        # Our own half-close that ended cleanly is no failure: reconnect at once. A usable connection
        # that dropped is retried at once too (its cluster may have failed over), once per cycle.
        delay = 0.0 if end.kind == "drained" else timing.reconnect
        if delay > 0 and conn.ready_since is not None and now() - slot.quick_retry_at >= timing.reconnect:
            slot.quick_retry_at = now()
            delay = 0.0
        slot.reconnect = self._loop.call_later(delay, self._open, slot, slot.configured)
