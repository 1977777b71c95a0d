"""One connection to one address (asyncio protocol).

The ``H`` handshake, pipelined requests matched to replies by (op, key) in
send order, idle pings, and every rule that makes a connection session-fatal
(PROTOCOL.md, CLIENT.md). It never retries anything itself: each request's
outcome goes to whoever sent it. Runs on the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from typing import Callable, Literal, Optional

from ._timing import now, timing
from ._wire import LineFramer, Reply, WireError, parse_reply, split_address
from .errors import AuthError, KeyPermissionError, ProtocolError

Op = Literal["A", "R", "X", "P"]
StateKind = Literal["connecting", "greeting", "ready", "draining", "closed"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of a request.

    ``reply``: answered. ``dropped``: unanswered, and the server certainly did
    not grant it (only for ``A``, after a clean close following our FIN).
    ``unsent``: never written (the connection ended, or its write failed at
    once, before the bytes left): it had no effect. ``lost``: unanswered; it
    may or may not have taken effect.
    """

    kind: Literal["reply", "dropped", "unsent", "lost"]
    reply: Optional[Reply] = None
    error: Optional[BaseException] = None


@dataclass(frozen=True, slots=True)
class End:
    """Why a connection ended."""

    #: drained: the server closed cleanly after our FIN. redirect: ``M``. failed: broken,
    #: ``E``, a protocol violation, silence. shutdown: closed by the broker.
    kind: Literal["drained", "redirect", "failed", "shutdown"]
    address: Optional[str] = None
    error: Optional[BaseException] = None


Settle = Callable[[Outcome], None]


class Pending:
    """One unanswered request. ``settle`` is replaceable: an aborted acquire swaps in its compensation."""

    __slots__ = ("op", "key", "sent_at", "due_at", "settle", "written")

    def __init__(self, op: Op, key: str, sent_at: float, due_at: float, settle: Settle) -> None:
        self.op = op
        self.key = key
        #: When the write was issued (monotonic s): the start of the conservative lease.
        self.sent_at = sent_at
        #: ``A``: by when its reply could have come at the latest: the end of its wait, moved to when the
        #: earlier same-key acquire was answered if that was later.
        self.due_at = due_at
        self.settle = settle
        #: The bytes were handed to the transport (until then the request can be taken back).
        self.written = False


def _ignore(_: Outcome) -> None:
    pass


class Connection(asyncio.Protocol):
    def __init__(
        self,
        address: str,
        hello: bytes,
        ssl_context: Optional[ssl.SSLContext],
        on_ready: Callable[[Connection], None],
        on_closed: Callable[[Connection, End], None],
        on_heard: Callable[[Connection], None],
    ) -> None:
        self.address = address
        self._hello = hello
        self._on_ready = on_ready
        self._on_closed = on_closed
        #: Data came on a ``suspect`` connection: usable again.
        self._on_heard = on_heard
        self.state: StateKind = "connecting"
        self.node_name: Optional[str] = None
        #: When the ``H`` reply came (monotonic s).
        self.ready_since: Optional[float] = None
        self.end: Optional[End] = None
        self._transport: Optional[asyncio.Transport] = None
        self._framer = LineFramer()
        #: Unanswered requests by (op, key), oldest first.
        self._pending: dict[tuple[str, str], list[Pending]] = {}
        self._opened_at = now()
        self._last_data_at = now()
        self._ping_sent_at: Optional[float] = None
        #: How long the ping in flight may go unanswered (idle and busy pings differ).
        self._pong_within = timing.pong_timeout
        #: Another connection to this server went silent and nothing has come on this one since:
        #: likely silent too (a stopped process, a frozen VM). Pinged with the busy pong deadline;
        #: the pool gives it no new request until data arrives.
        self.suspect = False
        #: It died of silence (no pong in time) while ready, not of one queue's overdue reply, a reset,
        #: a close or an error reply.
        self.died_silent = False
        #: After our FIN: the server answered the ``P`` sent with it (its close is then a drain, not a crash).
        self._drain_ponged = False
        self._last_tick_at = now()
        #: A deadline verdict waiting for the I/O that is ready to be read first.
        self._verdict_deferred = False
        #: TLS: asyncio cannot half-close it (see ``can_half_close``).
        self.tls = ssl_context is not None
        self._outbox: list[tuple[Pending, bytes]] = []
        self._loop = asyncio.get_running_loop()
        self._ticker: Optional[asyncio.TimerHandle] = self._loop.call_later(timing.tick, self._tick)
        host, port = split_address(address)
        server_hostname = host if ssl_context is not None else None
        self._connecting: Optional[asyncio.Task[object]] = self._loop.create_task(
            self._connect(host, port, ssl_context, server_hostname)
        )

    async def _connect(self, host: str, port: int, ctx: Optional[ssl.SSLContext], server_hostname: Optional[str]) -> object:
        try:
            await self._loop.create_connection(lambda: self, host, port, ssl=ctx, server_hostname=server_hostname)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # refused, unreachable, TLS handshake failure
            self._connecting = None
            self._fail(err)
        self._connecting = None
        return None

    # --- what the pool and broker use -------------------------------------------------

    @property
    def usable(self) -> bool:
        """Ready, and the transport still takes bytes: a request written now may reach the server."""
        t = self._transport
        return self.state == "ready" and t is not None and not t.is_closing()

    def send(self, op: Op, key: str, line: bytes, wait: int, settle: Settle) -> Pending:
        """Queues a request; the caller checked ``usable``. ``sent_at`` is taken before the bytes leave,
        so a lease counted from it is never longer than the server's."""
        sent_at = now()
        ident = (op, key)
        queue = self._pending.get(ident)
        if queue is None:
            queue = self._pending[ident] = []
        p = Pending(op, key, sent_at, sent_at + wait, settle)
        queue.append(p)
        # Requests made in one loop iteration go out in one write, two callbacks later: a task
        # cancelled right after it queued a request is woken before then and takes it back unsent.
        if not self._outbox:
            self._loop.call_soon(self._loop.call_soon, self._flush)
        self._outbox.append((p, line))
        return p

    def take_back(self, p: Pending) -> bool:
        """Withdraws a request not written yet (an abort in the same loop iteration): nothing is sent."""
        if p.written or self.state == "closed":
            return False
        self._outbox = [(q, line) for q, line in self._outbox if q is not p]
        ident = (p.op, p.key)
        queue = self._pending.get(ident)
        if queue is not None and p in queue:
            queue.remove(p)
            if not queue:
                del self._pending[ident]
        return True

    @property
    def draining(self) -> bool:
        return self.state == "draining"

    @property
    def can_half_close(self) -> bool:
        """False over TLS: asyncio's TLS transport cannot send a FIN and keep reading."""
        t = self._transport
        return t is not None and t.can_write_eof()

    def half_close(self) -> None:
        """FIN: the server drops this connection's waiting acquires, writes what it decided, then closes.

        A ``P`` goes right before the FIN: a server that drains answers it before it closes; a crashed
        one (its kernel sends a FIN too) does not, and then nothing unanswered is known to be dropped.
        The caller checked ``can_half_close``.
        """
        if self.state in ("closed", "draining"):
            return
        self.state = "draining"
        self._last_data_at = now()  # the server gets a fresh grace period to answer and close

        def ponged(outcome: Outcome) -> None:
            self._drain_ponged = outcome.kind == "reply"

        self.send("P", "", b"P\n", 0, ponged)
        self._flush()
        t = self._transport
        assert t is not None
        t.write_eof()

    def sibling_went_silent(self) -> None:
        """A connection to the same server died of silence: check this one at once (see ``suspect``)."""
        if self.state != "ready":
            return
        self.suspect = True
        t = now()
        if self._ping_sent_at is not None:
            # A ping already in flight: its deadline becomes the short one too.
            self._pong_within = min(self._pong_within, t - self._ping_sent_at + timing.busy_pong_timeout)
            return
        self._ping(t, timing.busy_pong_timeout)
        self._flush()

    def leave_for_silent_sibling(self) -> bool:
        """Another connection to the same server went silent, and this one was only redirected here:
        closed at once, so its slot dials its own address (whose node may be taking over) instead of
        waiting for a pong that likely never comes. Returns False, changing nothing, while an acquire or
        extension waits on it (closing would make its outcome unknown): it is checked as a suspect
        instead. Releases are re-sent elsewhere, as on any close."""
        if self.state != "ready":
            return False
        if any(op in ("A", "X") for op, _ in self._pending):
            return False
        self._fail(ConnectionError(f"{self.address}: another connection to it went silent"))
        return True

    def shutdown(self) -> None:
        """Closes at once; unanswered requests are lost."""
        self._finish(End("shutdown"))

    # --- asyncio.Protocol ------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        if self.state != "connecting":
            transport.abort()
            return
        self.state = "greeting"
        self._last_data_at = now()
        transport.write(self._hello)

    def data_received(self, data: bytes) -> None:
        if self.state == "closed":
            return
        self._last_data_at = now()
        if self.suspect:
            self.suspect = False
            self._on_heard(self)
        lines = self._framer.push(data)
        if isinstance(lines, WireError):
            self._fail(ProtocolError(f"{self.address} sent a reply longer than 512 bytes"))
            return
        for line in lines:
            try:
                reply = parse_reply(line)
            except WireError as err:
                self._fail(ProtocolError(f"{self.address} sent a bad reply ({err.text}): {_excerpt(line)}"))
                return
            self._on_reply(reply, line)
            if self.end is not None:  # the reply closed the connection
                return

    def eof_received(self) -> Optional[bool]:
        # After our FIN, a clean close that followed the pong means the server dropped what it had not decided.
        if self.state == "draining" and self._drain_ponged:
            self._finish(End("drained"))
        elif self.state == "draining":
            self._fail(ConnectionError(f"{self.address} closed after our FIN without answering the P sent with it (crashed?)"))
        else:
            self._fail(ConnectionError(f"{self.address} closed the connection"))
        return None

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self._fail(exc if exc is not None else ConnectionError(f"connection to {self.address} closed"))

    # --- internals ---------------------------------------------------------------------

    def _flush(self) -> None:
        if not self._outbox:
            return
        batch = self._outbox
        self._outbox = []
        t = self._transport
        if self.state != "closed" and t is not None and not t.is_closing():
            idle = t.get_write_buffer_size() == 0
            for p, _ in batch:
                p.written = True
            t.write(b"".join(line for _, line in batch))
            # A write that failed at once (the peer had reset the connection) on an idle transport sent
            # nothing (one send() call either sends bytes or fails): those requests may go elsewhere.
            if idle and t.is_closing() and t.get_write_buffer_size() == 0 and self.end is None:
                for p, _ in batch:
                    p.written = False

    def _on_reply(self, reply: Reply, line: bytes) -> None:
        op = reply.op
        if op == "A" or op == "T" or op == "B":
            if self._answer("A", reply.key, reply):
                return
        elif op == "R" or op == "N":
            if self._answer("R", reply.key, reply):
                return
        elif op == "X" or op == "G":
            if self._answer("X", reply.key, reply):
                return
        elif op == "P":
            if self._answer("P", "", reply):
                self._ping_sent_at = None
                return
        elif op == "H":
            if self.state == "greeting":
                self.state = "ready"
                self.node_name = reply.node_name
                self.ready_since = now()
                self._on_ready(self)
                return
        elif op == "M":
            self._finish(End("redirect", address=reply.address))
            return
        elif op == "E":
            text = f"{self.address} closed the session: E {reply.code} {reply.text}".rstrip()
            err: BaseException
            if reply.code == "auth":
                err = AuthError(text)
            elif reply.code == "perm":
                err = self._perm_error(text)
            else:
                err = ProtocolError(text, server_code=reply.code)
            self._fail(err)
            return
        self._fail(ProtocolError(f"{self.address} sent a reply that matches no request: {_excerpt(line)}"))

    def _perm_error(self, text: str) -> BaseException:
        """``E perm`` names no key: it answers the one request still unanswered, if there is exactly one
        (then ``KeyPermissionError``: refused, nothing granted). With several, the refused one cannot be
        told apart and another acquire may have been granted just before, so it is a plain session error:
        unanswered acquires become indeterminate, releases are retried. A request not written yet counts
        too (it only makes the outcome more cautious); pings do not."""
        asked = [p for queue in self._pending.values() for p in queue if p.op != "P"]
        if len(asked) == 1 and asked[0].written:
            return KeyPermissionError(text)
        return ProtocolError(
            f"{text} ({len(asked)} requests were unanswered, so the refused one is unknown)", server_code="perm"
        )

    def _answer(self, op: Op, key: str, reply: Reply) -> bool:
        """Settles the oldest unanswered request of (op, key); False if there is none."""
        ident = (op, key)
        queue = self._pending.get(ident)
        if not queue:
            return False
        p = queue.pop(0)
        if not queue:
            del self._pending[ident]
        elif op == "A":
            # Same-key replies come in order: the next one could not come before this one did.
            head = queue[0]
            head.due_at = max(head.due_at, now())
        p.settle(Outcome("reply", reply=reply))
        return True

    def _fail(self, error: BaseException) -> None:
        self._finish(End("failed", error=error))

    def _finish(self, end: End) -> None:
        """The one way out: every unanswered request gets its outcome, then the pool hears of it."""
        if self.state == "closed":
            return
        self.state = "closed"
        self.end = end
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if self._connecting is not None:
            self._connecting.cancel()
        if self._transport is not None:
            self._transport.abort()
        if end.kind == "failed":
            assert end.error is not None
            lost = Outcome("lost", error=end.error)
        elif end.kind == "redirect":
            lost = Outcome("lost", error=ConnectionError(f"{self.address} redirected (M {end.address or '-'})"))
        else:
            lost = Outcome("lost", error=ConnectionError(f"connection to {self.address} closed"))
        queues = list(self._pending.values())
        self._pending.clear()
        for queue in queues:
            for p in queue:
                if not p.written:
                    p.settle(Outcome("unsent"))
                elif p.op == "A" and end.kind == "drained":
                    p.settle(Outcome("dropped"))
                else:
                    p.settle(lost)
        self._on_closed(self, end)

    def _tick(self) -> None:
        """Deadlines: handshake, pings, pong, overdue replies, a server that does not close after our FIN.

        A tick that comes long after the one before means the process was paused (a VM freeze, SIGSTOP,
        a blocked event loop): every deadline moves on by the gap instead of expiring, since replies
        that came meanwhile are not read yet. A deadline that has passed is only a verdict once the I/O
        that is ready now has been read (two loop iterations later: the next one's I/O callbacks run
        after what was already queued).
        """
        self._ticker = None
        if self.state == "closed":
            return
        t = now()
        gap = t - self._last_tick_at
        self._last_tick_at = t
        if gap > timing.tick + timing.pause_gap:
            self._rearm(gap)
        elif not self._verdict_deferred and self._overdue(t) is not None:
            self._verdict_deferred = True
            self._loop.call_soon(self._loop.call_soon, self._verdict)
        elif not self._verdict_deferred:
            self._ping_if_quiet(t)
        self._ticker = self._loop.call_later(timing.tick, self._tick)

    def _verdict(self) -> None:
        self._verdict_deferred = False
        t = now()
        why = self._overdue(t)
        if why is not None:
            # Silent: not even a pong (one queue's overdue reply is not: the server may answer the rest).
            self.died_silent = self.state == "ready" and self._pong_overdue(t)
            self._fail(ConnectionError(f"{self.address}: {why}"))

    def _rearm(self, by: float) -> None:
        """Moves every deadline ``by`` seconds later (the process was paused for about that long)."""
        self._opened_at += by
        self._last_data_at += by
        if self._ping_sent_at is not None:
            self._ping_sent_at += by
        for queue in self._pending.values():
            for p in queue:
                p.due_at += by

    def _overdue(self, t: float) -> Optional[str]:
        """Why the connection counts as dead at ``t``, if it does."""
        if self.state in ("connecting", "greeting"):
            if t - self._opened_at >= timing.handshake:
                return f"no hello reply within {timing.handshake} s"
        elif self.state == "draining":
            if t - self._last_data_at >= timing.reply_grace:
                return f"did not close within {timing.reply_grace} s of our FIN"
        elif self.state == "ready":
            if self._pong_overdue(t):
                return f"no pong within {self._pong_within} s"
            if self._overdue_acquire(t):
                return f"no reply to an acquire {timing.reply_grace} s after it could have come"
        return None

    def _ping_if_quiet(self, t: float) -> None:
        """Pings after ``idle_ping`` of quiet, or ``busy_ping`` while a request is outstanding."""
        if self.state != "ready":
            return
        busy = any(op != "P" for op, _ in self._pending)
        if self._ping_sent_at is not None:
            # An idle ping in flight when requests come to wait on it: its pong is due by the busy
            # deadline from now (a hung server still shows in about 2 s, not in what is left of the idle one).
            if busy:
                self._pong_within = min(self._pong_within, t - self._ping_sent_at + timing.busy_pong_timeout)
            return
        if t - self._last_data_at < (timing.busy_ping if busy else timing.idle_ping):
            return
        self._ping(t, timing.busy_pong_timeout if busy else timing.pong_timeout)

    def _pong_overdue(self, t: float) -> bool:
        """The ping in flight has gone unanswered past its deadline."""
        return self._ping_sent_at is not None and t - self._ping_sent_at >= self._pong_within

    def _ping(self, t: float, pong_within: float) -> None:
        self._ping_sent_at = t
        self._pong_within = pong_within
        self.send("P", "", b"P\n", 0, _ignore)

    def _overdue_acquire(self, t: float) -> bool:
        """"Silent" is judged per (op,key) queue, whatever other traffic the connection carries: only
        the oldest acquire of each key can be overdue (the later ones' replies wait for it)."""
        for (op, _), queue in self._pending.items():
            if op == "A" and t >= queue[0].due_at + timing.reply_grace:
                return True
        return False


def _excerpt(line: bytes) -> str:
    text = line[:60].decode("utf-8", "replace")
    return repr(text + "..." if len(line) > 60 else text)

