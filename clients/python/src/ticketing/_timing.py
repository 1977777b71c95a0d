"""The numbers of CLIENT.md, in seconds, in one place so tests can shorten them.

Changing ``timing`` is for tests only; the defaults are the contract.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass
class Timing:
    #: A dropped connection is reconnected to its configured address after this.
    reconnect: float = 3.0
    #: A connection with nothing received for this long is pinged.
    idle_ping: float = 5.0
    #: No pong within this: the connection is dead.
    pong_timeout: float = 5.0
    #: An acquire with no reply this long after it could have come, on a connection silent as long, is lost.
    reply_grace: float = 5.0
    #: Connect plus the ``H`` reply must take at most this.
    handshake: float = 5.0
    #: A release is retried until this long after the call.
    release_window: float = 5.0
    #: A release unanswered this long is also sent on another usable connection.
    release_resend: float = 0.5
    #: Poll interval while no connection is usable (release, re-send).
    retry: float = 0.2
    #: A ``T`` this much earlier than the wait could have run out means a node stepped down.
    early_timeout: float = 0.1
    #: How often each connection checks its deadlines.
    tick: float = 0.5
    #: Most re-sends of one acquire after early ``T`` replies (step-downs); then TIMEOUT.
    max_step_down_resends: int = 5
    #: Most ``M host:port`` redirects followed in a row.
    max_redirects: int = 3


timing = Timing()

#: Monotonic seconds: every clock read of the client.
now = time.monotonic
