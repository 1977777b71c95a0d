"""Ticketing client: FIFO locks with fencing tokens, for asyncio and blocking code.

Two faces over one core (the same rules as the TypeScript and JVM clients)::

    async with AsyncTicketBroker("127.0.0.1:5225") as broker:
        await broker.wait_ready(5)
        async with broker.acquire("orders/42", wait=5, lease=30) as ticket:
            ...  # fence the write with ticket.token

    broker = TicketBroker("127.0.0.1:5225")      # thread-safe, share one per process
    with broker.acquire("orders/42", wait=5, lease=30) as ticket:
        ...
"""

from ._async import AcquireCall, AsyncTicket, AsyncTicketBroker, BrokerState, ConnectionEvent, ReleaseResult
from ._blocking import Ticket, TicketBroker
from ._options import TlsCa, TlsOption
from ._pool import ConnectionState
from ._version import __version__
from .errors import (
    ERROR_CODES,
    AuthError,
    CapacityError,
    ClosedError,
    IndeterminateError,
    InsufficientLeaseError,
    InvalidArgumentError,
    KeyPermissionError,
    LeaseEndedError,
    LockTimeoutError,
    NoConnectionError,
    ProtocolError,
    ReleasedError,
    ReleaseFailedError,
    TicketingError,
)

__all__ = [
    "__version__",
    "AcquireCall",
    "AsyncTicket",
    "AsyncTicketBroker",
    "AuthError",
    "BrokerState",
    "CapacityError",
    "ClosedError",
    "ConnectionEvent",
    "ConnectionState",
    "ERROR_CODES",
    "IndeterminateError",
    "InsufficientLeaseError",
    "InvalidArgumentError",
    "KeyPermissionError",
    "LeaseEndedError",
    "LockTimeoutError",
    "NoConnectionError",
    "ProtocolError",
    "ReleaseFailedError",
    "ReleaseResult",
    "ReleasedError",
    "Ticket",
    "TicketBroker",
    "TicketingError",
    "TlsCa",
    "TlsOption",
]
