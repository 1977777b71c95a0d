"""Checks and normalises what callers pass in, before anything is sent.

Durations are seconds (int, float or ``datetime.timedelta``), rounded UP to
whole seconds on the wire; out-of-range values are rejected, never clamped.
"""

from __future__ import annotations

import math
import re
import ssl
import warnings
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, Optional, Sequence, TypeVar, Union
from urllib.parse import parse_qsl, unquote

from ._wire import MAX_LEASE_SECONDS, MAX_LINE_BYTES, MAX_TOKEN, MAX_WAIT_SECONDS, MIN_LEASE_SECONDS, MIN_TOKEN, is_host_port, key_error
from .errors import InvalidArgumentError

Seconds = Union[int, float, timedelta]


@dataclass(frozen=True)
class TlsCa:
    """Verify the server against this CA: a file path, or PEM text when it contains ``-----BEGIN``."""

    ca: str


#: ``"off"`` (default), ``"system"`` (system trust store), ``TlsCa(path_or_pem)``,
#: ``"insecure"`` (no verification, tests only: warns), or your own ``ssl.SSLContext``.
TlsOption = Union[Literal["off", "system", "insecure"], TlsCa, ssl.SSLContext]


@dataclass(frozen=True, slots=True)
class AcquireRequest:
    key: str
    wait: int
    lease: int
    min_work: float


def check_key(key: object) -> str:
    problem = key_error(key)
    if problem is not None:
        raise InvalidArgumentError(f"bad key {key!r}: {problem}")
    assert isinstance(key, str)
    return key


def to_seconds(name: str, value: object) -> float:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InvalidArgumentError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


def _whole(name: str, value: object, low: int, high: int) -> int:
    s = math.ceil(to_seconds(name, value))
    if s < low or s > high:
        raise InvalidArgumentError(f"{name} {value!r} rounds up to {s} s; it must be {low}..{high} s")
    return s


def check_acquire(key: object, wait: object, lease: object, min_work: object) -> AcquireRequest:
    k = check_key(key)
    w = _whole("wait", wait, 0, MAX_WAIT_SECONDS)
    lease_s = _whole("lease", lease, MIN_LEASE_SECONDS, MAX_LEASE_SECONDS)
    m = to_seconds("min_work", min_work)
    if m > lease_s:
        # Up to the rounded lease, inclusive (CLIENT.md; seed 003 rejects only a larger budget).
        # Equal is sent but can never be met (some time always passes after the send): the
        # grant is released again and the acquire raises InsufficientLeaseError.
        raise InvalidArgumentError(f"min_work must be 0..the rounded lease ({lease_s} s), got {min_work!r}")
    return AcquireRequest(k, w, lease_s, m)


def check_lease(lease: object) -> int:
    """A lease in seconds, rounded up, 1..250 (``extend``)."""
    return _whole("lease", lease, MIN_LEASE_SECONDS, MAX_LEASE_SECONDS)


def check_token(token: object) -> int:
    if isinstance(token, bool) or not isinstance(token, int) or not MIN_TOKEN <= token <= MAX_TOKEN:
        raise InvalidArgumentError(f"token must be an int {MIN_TOKEN}..{MAX_TOKEN}, got {token!r}")
    return token


#: The port used when an address names a host only.
DEFAULT_PORT = 5225

_BARE_HOST = re.compile(r"[A-Za-z0-9._-]+|\[[0-9A-Za-z:.%]+\]")
URL_SCHEME = "ticketing://"


def _address(a: object) -> str:
    """``host:port``; a bare host (or ``[IPv6]``) gets port 5225, as in the TypeScript and JVM clients."""
    if isinstance(a, str) and is_host_port(a):
        return a
    if isinstance(a, str) and _BARE_HOST.fullmatch(a):
        return f"{a}:{DEFAULT_PORT}"
    raise InvalidArgumentError(f"bad address {a!r}: expected host or host:port (IPv6 in brackets)")


def parse_url(url: str) -> tuple[list[str], Optional[str], Optional[TlsOption]]:
    """``ticketing://[token@]host[:port][,host[:port]...][?tls=off|system|insecure][&ca=PATH]``.

    The token and the CA path are percent-decoded; ``ca`` means ``TlsCa(PATH)``.
    """
    rest = url[len(URL_SCHEME) :]
    rest, _, query = rest.partition("?")
    rest = rest.rstrip("/")
    token: Optional[str] = None
    if "@" in rest:
        raw, _, rest = rest.rpartition("@")
        token = unquote(raw)
    if rest == "":
        raise InvalidArgumentError(f"bad URL {url!r}: no host")
    addresses = [_address(h) for h in rest.split(",")]
    tls: Optional[TlsOption] = None
    for name, value in parse_qsl(query, keep_blank_values=True, strict_parsing=query != ""):
        if name == "tls" and value in ("off", "system", "insecure"):
            tls = value  # type: ignore[assignment]
        elif name == "ca" and value != "":
            tls = TlsCa(value)
        else:
            raise InvalidArgumentError(f"bad URL {url!r}: unknown option {name}={value} (tls=off|system|insecure, ca=PATH)")
    return addresses, token, tls


def check_addresses(addresses: object) -> tuple[list[str], Optional[str], Optional[TlsOption]]:
    """The addresses, and the token and TLS option a ``ticketing://`` URL carries (None when not)."""
    if isinstance(addresses, str) and addresses.startswith(URL_SCHEME):
        return parse_url(addresses)
    listed: object = [addresses] if isinstance(addresses, str) else addresses
    if not isinstance(listed, (list, tuple)) or len(listed) == 0:
        raise InvalidArgumentError('connect needs a "host:port", a list of them, or a ticketing:// URL')
    return [_address(a) for a in listed], None, None


T = TypeVar("T")


def resolve_option(name: str, given: Optional[T], from_url: Optional[T]) -> Optional[T]:
    """An option given both as an argument and in the URL must agree."""
    if given is not None and from_url is not None and given != from_url:
        raise InvalidArgumentError(f"{name} is given both in the URL and as an argument, with different values")
    return given if given is not None else from_url


def hello_line(token: object) -> bytes:
    """``H 1`` or ``H 1 <token>``, after checking the client token."""
    if token is None:
        return b"H 1\n"
    if not isinstance(token, str) or token == "" or any(ord(c) <= 0x20 or ord(c) == 0x7F for c in token):
        raise InvalidArgumentError("token must be a non-empty string without spaces or control characters")
    try:
        line = f"H 1 {token}".encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentError("token must be valid Unicode") from None
    if len(line) > MAX_LINE_BYTES:
        raise InvalidArgumentError("token is too long for one protocol line")
    return line + b"\n"


def ssl_context(tls: object) -> Union[ssl.SSLContext, None]:
    """The SSL context for a TLS option (None for ``"off"``)."""
    if tls == "off" or tls is None:
        return None
    if isinstance(tls, ssl.SSLContext):
        return tls
    if tls == "system":
        return ssl.create_default_context()
    if tls == "insecure":
        warnings.warn(
            "Ticketing client: tls='insecure' does not verify the server certificate; use it in tests only",
            RuntimeWarning,
            stacklevel=4,
        )
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    if isinstance(tls, TlsCa) and isinstance(tls.ca, str) and tls.ca != "":
        try:
            if "-----BEGIN" in tls.ca:
                return ssl.create_default_context(cadata=tls.ca)
            return ssl.create_default_context(cafile=tls.ca)
        except (OSError, ssl.SSLError) as err:
            raise InvalidArgumentError(f"cannot load the TLS CA {tls.ca[:60]!r}: {err}", cause=err) from err
    raise InvalidArgumentError(f"tls must be 'off', 'system', 'insecure', TlsCa(path_or_pem) or an ssl.SSLContext, got {tls!r}")


def check_timeout(name: str, value: object) -> float:
    return to_seconds(name, value)


