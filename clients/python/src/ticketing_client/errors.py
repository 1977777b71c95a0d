"""Every error the client raises is a :class:`TicketingError` with a stable ``code``.

The codes are the same in the TypeScript and JVM clients; match on
``err.code`` or on the class, never on the message. docs/client-python.md
lists them, and a test fails when this module and that page disagree.

Class names avoid Python's built-ins: ``LockTimeoutError`` (code ``TIMEOUT``)
and ``KeyPermissionError`` (code ``PERMISSION``) do not shadow
``TimeoutError`` and ``PermissionError``.
"""

from __future__ import annotations

from typing import ClassVar, Optional

ERROR_CODES = (
    "INVALID_ARGUMENT",
    "NO_CONNECTION",
    "TIMEOUT",
    "CAPACITY",
    "INDETERMINATE",
    "INSUFFICIENT_LEASE",
    "LEASE_ENDED",
    "RELEASED",
    "RELEASE_FAILED",
    "CLOSED",
    "PROTOCOL",
    "AUTH",
    "PERMISSION",
)


class TicketingError(Exception):
    """Base of every client error; ``code`` is stable across versions and languages."""

    code: ClassVar[str] = ""

    def __init__(self, message: str, *, cause: Optional[BaseException] = None) -> None:
        super().__init__(message)
        self.message = message
        if cause is not None:
            self.__cause__ = cause


class InvalidArgumentError(TicketingError, ValueError):
    """A bad key, duration, address, token or option. Nothing was sent."""

    code = "INVALID_ARGUMENT"


class NoConnectionError(TicketingError):
    """No connection was usable, so nothing was sent. ``__cause__`` is the last connection failure."""

    code = "NO_CONNECTION"


class KeyError_(TicketingError):
    """Base of the errors about one key (not exported under this name)."""

    def __init__(self, key: str, message: str, *, cause: Optional[BaseException] = None) -> None:
        super().__init__(message, cause=cause)
        self.key = key


class LockTimeoutError(KeyError_):
    """``T``: the wait ran out without a grant. Nothing is held."""

    code = "TIMEOUT"


class CapacityError(KeyError_):
    """``B``: a server limit was reached; nothing was queued or granted. Never retried by the client."""

    code = "CAPACITY"


class IndeterminateError(KeyError_):
    """The acquire may have reached the server but its reply was lost.

    The lock may be held until its lease ends. The client never re-sends such
    an acquire; do not enter the critical section.
    """

    code = "INDETERMINATE"


class InsufficientLeaseError(KeyError_):
    """Granted, but less conservative lease was left than ``min_work`` (or none).

    The client releases ``token`` in the background.
    """

    code = "INSUFFICIENT_LEASE"

    def __init__(self, key: str, token: int, remaining: float, min_work: float) -> None:
        super().__init__(
            key,
            f"granted {key} with {max(0.0, remaining):.3f} s of lease left, less than min_work {min_work} s; releasing it",
        )
        self.token = token
        self.remaining = remaining
        self.min_work = min_work


class LeaseEndedError(KeyError_):
    """The conservative lease end of a ticket was reached."""

    code = "LEASE_ENDED"


class ReleasedError(KeyError_):
    """The ticket was released."""

    code = "RELEASED"


class ReleaseFailedError(KeyError_):
    """No release attempt got a final reply within 5 s; the lock may be held until its lease ends."""

    code = "RELEASE_FAILED"

    def __init__(self, key: str, token: int, *, cause: Optional[BaseException] = None) -> None:
        super().__init__(
            key,
            f"no reply to the release of {key} (token {token}) within 5 s; "
            "it is held until its lease ends unless an attempt got through",
            cause=cause,
        )
        self.token = token


class ClosedError(TicketingError):
    """The broker was closed."""

    code = "CLOSED"


class ProtocolError(TicketingError):
    """The server sent a malformed, oversized, unknown or unmatched reply, or an ``E`` line."""

    code = "PROTOCOL"

    def __init__(self, message: str, *, server_code: Optional[str] = None, cause: Optional[BaseException] = None) -> None:
        super().__init__(message, cause=cause)
        #: The code of the server's ``E`` line, when that is what ended the session.
        self.server_code = server_code


class AuthError(TicketingError):
    """The server refused the client token (``E auth``)."""

    code = "AUTH"


class KeyPermissionError(TicketingError):
    """``E perm``: a key outside the key prefixes of the client identity; nothing was granted
    (or released, or extended).

    The ``E`` line names no key and the server closes the connection, so a
    request gets this error only when it was the one request unanswered on
    that connection. With several unanswered, which one was refused is
    unknown and another may have been granted just before: the acquires
    pending there raise ``IndeterminateError`` (its ``__cause__`` a
    ``ProtocolError`` with ``server_code`` ``perm``), and releases and
    extensions are retried on other connections as usual.
    """

    code = "PERMISSION"


ERROR_CLASSES: tuple[type[TicketingError], ...] = (
    InvalidArgumentError,
    NoConnectionError,
    LockTimeoutError,
    CapacityError,
    IndeterminateError,
    InsufficientLeaseError,
    LeaseEndedError,
    ReleasedError,
    ReleaseFailedError,
    ClosedError,
    ProtocolError,
    AuthError,
    KeyPermissionError,
)
