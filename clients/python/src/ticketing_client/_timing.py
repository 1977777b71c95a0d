"""The numbers of CLIENT.md, in seconds, in one place so tests can shorten them.

Changing ``timing`` is for tests only; the defaults are the contract.
"""

from __future__ import annotations

import random as _random
import time
from dataclasses import dataclass


@dataclass
class Timing:
    #: A dropped connection is reconnected to its configured address after this (each wait +-``reconnect_jitter``).
    reconnect: float = 3.0
    #: Reconnect waits are drawn from ``reconnect`` x [1 - this, 1 + this], so clients do not return in lockstep.
    reconnect_jitter: float = 0.2
    #: A connection with nothing received for this long is pinged.
    idle_ping: float = 5.0
    #: No pong within this: the connection is dead.
    pong_timeout: float = 5.0
    #: With a request outstanding, a connection with nothing received for this long is pinged.
    busy_ping: float = 0.75
    #: No pong to that ping within this: the connection is dead (a hung server shows within 2 s).
    busy_pong_timeout: float = 1.0
    #: An acquire with no reply this long after it could have come (its wait, the same-key replies before it) is lost.
    reply_grace: float = 5.0
    #: A gap between two ticks longer than the tick plus this means the process was paused: deadlines are re-armed.
    pause_gap: float = 1.0
    #: The conservative lease counts this fraction less than the rounded lease (each clock may run 1% off).
    lease_rate_allowance: float = 0.02
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
    #: How often each connection checks its deadlines: often enough that a silent server is given up
    #: within about 2 s of its last data (busy ping plus busy pong, each late by a tick at most).
    tick: float = 0.1
    #: Most re-sends of one acquire after early ``T`` replies (step-downs); then TIMEOUT.
    max_step_down_resends: int = 5
    #: Most ``M host:port`` redirects followed in a row.
    max_redirects: int = 3


timing = Timing()

#: Monotonic seconds: every clock read of the client.
now = time.monotonic


def jittered(seconds: float) -> float:
    """``seconds`` with +-``reconnect_jitter`` drawn uniformly."""
    j = timing.reconnect_jitter
    return seconds * (1 - j + 2 * j * _random.random())


def conservative_lease(lease_seconds: int) -> float:
    """The lease a ticket counts with: the rounded lease less the clock-rate allowance."""
    return lease_seconds * (1 - timing.lease_rate_allowance)
