"""``TicketBroker``: the blocking, thread-safe face (Celery, Django, scripts).

It owns an event loop on one background daemon thread and runs the same core
(``AsyncTicketBroker``) there; every call hands a coroutine to that loop and
waits for its result. Any number of threads may share one broker.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from types import TracebackType
from typing import Any, Coroutine, Optional, Sequence, TypeVar, Union

from ._async import AsyncTicket, AsyncTicketBroker, BrokerState, ConnectionEventHandler, ErrorHandler, ReleaseResult
from ._options import Seconds, TlsOption, check_acquire, check_key, check_lease, check_timeout, check_token
from .errors import ClosedError

T = TypeVar("T")


class Ticket:
    """A granted lock (blocking face). ``with broker.acquire(...) as ticket:`` releases on exit."""

    def __init__(self, broker: TicketBroker, inner: AsyncTicket) -> None:
        self._broker = broker
        self._inner = inner
        #: The key this ticket holds.
        self.key = inner.key
        #: The fencing token (exact u64): pass it to the protected resource with every write.
        self.token = inner.token
        #: Set (from the broker's thread) when the conservative lease end is reached.
        self.lease_ended = threading.Event()
        # Registered on the loop thread right after the grant, before anyone can release.
        if inner.lease_ended.is_set():
            self.lease_ended.set()
        else:
            inner._listeners.append(self.lease_ended.set)

    def remaining(self) -> float:
        """Seconds of lease left, counted from when the acquire was sent; 0 once it has run out."""
        return self._inner.remaining()

    @property
    def released(self) -> bool:
        """True once ``release()`` was called (or the context was left)."""
        return self._inner.released

    def raise_if_ended(self) -> None:
        """Raises ``ReleasedError`` after a release, ``LeaseEndedError`` once the conservative lease is over."""
        self._inner.raise_if_ended()

    def extend(self, lease: Seconds) -> None:
        """Extends this grant to ``lease`` seconds from when the request is written (``AsyncTicket.extend``)."""
        check_lease(lease)
        self._broker._run(self._inner.extend(lease))

    def release(self) -> ReleaseResult:
        """Releases exactly this grant: ``"released"`` or ``"not-held"``; raises ``ReleaseFailedError``
        when no attempt got a final reply within 5 s. Calling it again returns the first result."""

        async def go() -> ReleaseResult:
            return await asyncio.shield(self._inner.release())

        return self._broker._run(go())

    def __enter__(self) -> Ticket:
        return self

    def __exit__(
        self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        """A bounded best-effort release that never raises; failures go to the broker's ``on_error``."""
        if self._inner.released:
            return
        try:
            self._broker._run(self._inner.dispose())
        except ClosedError:
            pass

    def __repr__(self) -> str:
        return f"<Ticket key={self.key!r} token={self.token} remaining={self.remaining():.3f}s>"


class TicketBroker:
    """Connections to a Ticketing server (or cluster), for blocking code in any number of threads.

    Starts connecting at once: one connection per address, two when only one is given.
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
        """``addresses``: as for ``AsyncTicketBroker``. ``on_error`` and ``on_connection_event`` are
        called on the broker's own thread: keep them short and thread-safe."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="ticketing-client", daemon=True)
        self._thread.start()
        self._closed = False

        async def make() -> AsyncTicketBroker:
            return AsyncTicketBroker(
                addresses, token=token, tls=tls, on_error=on_error, on_connection_event=on_connection_event
            )

        try:
            self._core = self._run(make())
        except BaseException:
            self._stop_loop()
            raise

    def __enter__(self) -> TicketBroker:
        return self

    def __exit__(
        self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()

    def wait_ready(self, timeout: Seconds) -> None:
        """Returns once a connection is usable; raises ``NoConnectionError`` or ``AuthError`` after ``timeout`` s."""
        check_timeout("timeout", timeout)
        self._run(self._core.wait_ready(timeout))

    def acquire(
        self, key: str, *, wait: Seconds, lease: Seconds, min_work: Seconds = 0, keep_alive: bool = False
    ) -> Ticket:
        """Acquires ``key`` (blocking up to about ``wait`` seconds); use the ticket as a context manager.

        If the calling thread is interrupted while waiting (KeyboardInterrupt, a Celery soft time
        limit), the acquire is cancelled as ``AsyncTicketBroker.acquire`` describes, and a ticket that
        was granted just as the interruption came is released by its token: nothing stays held.
        """
        check_acquire(key, wait, lease, min_work)  # InvalidArgumentError in the caller's thread

        async def go() -> Ticket:
            inner = await self._core.acquire(key, wait=wait, lease=lease, min_work=min_work, keep_alive=keep_alive)
            return Ticket(self, inner)

        return self._run(go())

    def release(self, key: str, token: int) -> ReleaseResult:
        """Releases exactly ``token`` of ``key``, retried on any connection until 5 s after the call."""
        check_key(key)
        check_token(token)
        return self._run(self._core.release(key, token))

    def close(self) -> None:
        """Fails acquires in progress with ``ClosedError``, waits (at most 5 s) for releases in flight,
        closes the connections and stops the background thread. Held tickets are left to their leases."""
        if self._closed:
            return
        self._closed = True
        try:
            self._run(self._core.close(), closing=True)
        finally:
            self._stop_loop()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def state(self) -> BrokerState:
        """A snapshot of the connections (read on the caller's thread; a moment's view)."""
        return self._core.state

    def _stop_loop(self) -> None:
        if self._thread is threading.current_thread():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()

    def _run(self, coro: Coroutine[Any, Any, T], closing: bool = False) -> T:
        """Runs ``coro`` on the broker's loop and waits; an interruption of this thread cancels it there."""
        if self._closed and not closing:
            coro.close()
            raise ClosedError("the broker was closed")
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("TicketBroker's blocking calls cannot be made from its own event-loop thread")
        fut: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result()
        except BaseException:
            if not fut.done():
                fut.cancel()  # the task sees CancelledError: the abort rules apply there
            # The coroutine may have finished just as this thread was interrupted (or before the
            # cancellation reached it): a ticket nobody will see is released, never left held.
            fut.add_done_callback(self._abandoned)
            raise

    def _abandoned(self, fut: concurrent.futures.Future[Any]) -> None:
        if fut.cancelled() or fut.exception() is not None:
            return
        result = fut.result()
        if isinstance(result, Ticket) and not result.released:
            inner = result._inner
            self._loop.call_soon_threadsafe(lambda: self._core._track(inner.dispose()))
