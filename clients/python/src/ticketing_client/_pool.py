"""The connection pool: one slot per configured address (two when only one is
given), round-robin over usable connections, ``M`` redirects, and reconnection
to the configured address: at once after a usable connection dropped (once per
cycle), otherwise on the 3 s cycle, each wait drawn with +-20% jitter. Tells
its listener about connection changes. Runs on the broker's event loop."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from typing import Callable, Literal, Optional

from ._connection import Connection, End
from ._timing import jittered, now, timing
from .errors import AuthError, NoConnectionError

Accept = Callable[[Connection], bool]


@dataclass(frozen=True)
class ConnectionState:
    """One connection slot, as ``broker.state`` shows it."""

    #: The address this slot was configured with (reconnects go there).
    configured: str
    #: The address of the current connection (differs after ``M host:port``); None while down.
    address: Optional[str]
    #: ``down``: no connection now (a reconnect is scheduled unless the broker is closed).
    state: Literal["connecting", "greeting", "ready", "draining", "down"]
    #: The server's node name from its ``H`` reply, while ready.
    node_name: Optional[str]
    #: Why the last connection of this slot failed, if it did.
    last_error: Optional[BaseException]


class PoolListener:
    """What the pool tells its broker about connections (turned into connection-state events)."""

    def connected(self, address: str, configured: str, node_name: str) -> None: ...

    def disconnected(self, address: str, configured: str, error: Optional[BaseException]) -> None: ...

    def redirected(self, from_address: str, to: Optional[str], configured: str) -> None: ...


class _Slot:
    __slots__ = ("configured", "conn", "redirects", "reconnect", "last_error", "quick_retry_at", "bouncing_since")

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
        #: Since when redirect targets of this slot have been unreachable (None: none failed since the
        #: last usable connection). Failing over, a standby may name the dead active for a few hundred
        #: ms more: the slot goes back to its configured address every ``retry`` for up to ``reconnect``.
        self.bouncing_since: Optional[float] = None


class Pool:
    def __init__(
        self,
        addresses: list[str],
        hello: bytes,
        ssl_context: Optional[ssl.SSLContext],
        listener: Optional[PoolListener] = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._listener = listener or PoolListener()
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
            # Not a suspect one (its server went silent on another connection): it answers its ping within
            # a round trip if the server is alive, and is dead within the busy pong deadline if not.
            if conn is not None and conn.usable and not conn.suspect and (accept is None or accept(conn)):
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

    def snapshot(self) -> list[ConnectionState]:
        """One entry per slot, in configured order (``broker.state``)."""
        out: list[ConnectionState] = []
        for s in self._slots:
            c = s.conn
            if c is None or c.state == "closed":
                out.append(ConnectionState(s.configured, None, "down", None, s.last_error))
            else:
                node = c.node_name if c.state == "ready" else None
                out.append(ConnectionState(s.configured, c.address, c.state, node, s.last_error))
        return out

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

        def on_ready(conn: Connection) -> None:
            slot.redirects = 0
            slot.bouncing_since = None
            slot.last_error = None
            self._listener.connected(conn.address, slot.configured, conn.node_name or "")
            self._wake_waiters()

        def on_closed(conn: Connection, end: End) -> None:
            self._on_closed(slot, conn, end)

        slot.conn = Connection(address, self._hello, self._ssl, on_ready, on_closed, lambda _: self._wake_waiters())

    def _wake_waiters(self) -> None:
        """A connection became usable (a new one, or a suspect one that was heard from)."""
        for fut in list(self._ready_waiters):
            if not fut.done():
                fut.set_result(None)

    def _on_closed(self, slot: _Slot, conn: Connection, end: End) -> None:
        if slot.conn is not conn:
            return
        slot.conn = None
        # A server silent on one connection (SIGSTOP, a frozen VM) is silent on all: check the others to it
        # at once rather than each on its own ping cycle (an idle one would take 5 s + 5 s). One that was
        # only redirected to it goes back to its own address at once: that node may be the one taking over.
        if conn.died_silent:
            for other in self._slots:
                sibling = other.conn
                if sibling is None or sibling.address != conn.address:
                    continue
                if other.configured == sibling.address or not sibling.leave_for_silent_sibling():
                    sibling.sibling_went_silent()
        # Only a connection that was usable was "connected"; a failed attempt is no news.
        if conn.ready_since is not None:
            self._listener.disconnected(conn.address, slot.configured, end.error if end.kind == "failed" else None)
        if end.kind == "redirect":
            self._listener.redirected(conn.address, end.address, slot.configured)
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
        # configured address, whose node may be taking over, every ``retry`` for at most ``reconnect``.
        if end.kind == "failed" and conn.ready_since is None and slot.redirects > 0 and conn.address != slot.configured:
            if slot.bouncing_since is None:
                slot.bouncing_since = now()
            if now() - slot.bouncing_since < timing.reconnect:
                slot.redirects = 0
                slot.reconnect = self._loop.call_later(timing.retry, self._open, slot, slot.configured)
                return
        slot.redirects = 0
        slot.bouncing_since = None
        # Our own half-close that ended cleanly is no failure: reconnect at once. A usable connection
        # that dropped (not by ``M -``: no node is active yet) is retried at once too, since its
        # cluster may have failed over: once per cycle.
        delay = 0.0 if end.kind == "drained" else jittered(timing.reconnect)
        dash = end.kind == "redirect" and end.address is None
        if delay > 0 and conn.ready_since is not None and not dash and now() - slot.quick_retry_at >= timing.reconnect:
            slot.quick_retry_at = now()
            delay = 0.0
        slot.reconnect = self._loop.call_later(delay, self._open, slot, slot.configured)
