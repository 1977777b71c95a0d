"""The wire codec (PROTOCOL.md): parse and format request and reply lines.

Pure: no I/O, no clock. Lines are bytes without their ``\\n`` (and without a
``\\r`` before it). Anything that is not a well-formed line is a
:class:`WireError` with the code the server would answer (``proto``,
``range``, ``toolong``); a client treats a bad reply as session-fatal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Optional, Union

MAX_LINE_BYTES = 512
MAX_KEY_BYTES = 250
MAX_WAIT_SECONDS = 255
MIN_LEASE_SECONDS = 1
MAX_LEASE_SECONDS = 250
MIN_TOKEN = 1
MAX_TOKEN = 2**64 - 1

_NUMBER = re.compile(rb"0|[1-9][0-9]*")
_ERROR_CODE = re.compile(rb"[a-z]+")
_PORT = re.compile(r"[1-9][0-9]{0,4}")
_KEY_OPS = {b"T": "T", b"B": "B", b"R": "R", b"N": "N", b"X": "X", b"G": "G"}


class WireError(Exception):
    """A line that breaks the protocol; ``code`` is what the server answers it with."""

    def __init__(self, code: str, text: str) -> None:
        super().__init__(f"{code}: {text}")
        self.code = code
        self.text = text


ReplyOp = Literal["H", "A", "T", "B", "R", "N", "X", "G", "P", "M", "E"]


@dataclass(frozen=True, slots=True)
class Reply:
    """One reply. Only the fields of its op are meaningful."""

    op: ReplyOp
    key: str = ""
    token: int = 0
    node_name: str = ""
    #: ``M``: the active node's ``host:port``, or None for ``M -``.
    address: Optional[str] = None
    code: str = ""
    text: str = ""


RequestOp = Literal["H", "A", "R", "X", "P"]


@dataclass(frozen=True, slots=True)
class Request:
    op: RequestOp
    key: str = ""
    wait: int = 0
    lease: int = 0
    token: int = 0
    client_token: Optional[str] = None


def _fields(line: bytes) -> list[bytes]:
    """Splits on single spaces; an empty field (leading, trailing or double space, empty line) is ``proto``."""
    fields = line.split(b" ")
    if any(f == b"" for f in fields):
        raise WireError("proto", "empty line" if line == b"" else "fields must be separated by exactly one space")
    return fields


def _word(field: bytes, what: str, max_bytes: Optional[int] = None) -> str:
    """A key-like field: no byte below 0x21, no 0x7F, valid UTF-8 (and at most ``max_bytes``)."""
    if max_bytes is not None and len(field) > max_bytes:
        raise WireError("proto", f"bad {what}: longer than {max_bytes} bytes")
    if any(b < 0x21 or b == 0x7F for b in field):
        raise WireError("proto", f"bad {what}: control character or DEL")
    try:
        return field.decode("utf-8")  # strict: rejects overlong forms and surrogates
    except UnicodeDecodeError:
        raise WireError("proto", f"bad {what}: invalid UTF-8") from None


def _key(field: bytes) -> str:
    return _word(field, "key", MAX_KEY_BYTES)


def _number(field: bytes, what: str, low: int, high: int) -> int:
    """An unsigned decimal without sign or leading zeros; syntax errors are ``proto``, range errors ``range``."""
    if _NUMBER.fullmatch(field) is None:
        raise WireError("proto", f"bad number for {what}")
    value = int(field)
    if value < low or value > high:
        raise WireError("range", f"{what} must be {low}..{high}")
    return value


def parse_reply(line: bytes) -> Reply:
    """Parses one reply line; raises WireError (``proto`` or ``toolong``) for anything else."""
    if len(line) > MAX_LINE_BYTES:
        raise WireError("toolong", "reply longer than 512 bytes")
    # E's text is free-form: split it off before the strict field rules apply.
    if line[:1] == b"E" and (len(line) == 1 or line[1:2] == b" "):
        rest = line[2:]
        code, _, text = rest.partition(b" ")
        if _ERROR_CODE.fullmatch(code) is None:
            raise WireError("proto", "malformed reply: bad error code")
        return Reply("E", code=code.decode("ascii"), text=text.decode("utf-8", "replace"))
    fields = _fields(line)
    op = fields[0]
    n = len(fields)
    if n == 2 and op in _KEY_OPS:
        return Reply(_KEY_OPS[op], key=_key(fields[1]))  # type: ignore[arg-type]
    if n == 2 and op == b"M":
        address = _word(fields[1], "address")
        if address == "-":
            return Reply("M", address=None)
        if not is_host_port(address):
            raise WireError("proto", "malformed reply: bad address")
        return Reply("M", address=address)
    if n == 3 and op == b"A":
        try:
            token = _number(fields[1], "token", MIN_TOKEN, MAX_TOKEN)
        except WireError:
            raise WireError("proto", "malformed reply: bad token") from None
        return Reply("A", token=token, key=_key(fields[2]))
    if n == 1 and op == b"P":
        return Reply("P")
    if n == 3 and op == b"H":
        if fields[1] != b"1":
            raise WireError("proto", "malformed reply: bad protocol version")
        return Reply("H", node_name=_word(fields[2], "node name"))
    raise WireError("proto", "malformed or unknown reply")


def format_reply(reply: Reply) -> bytes:
    """The reply line, ``\\n`` included (used by tests and fake servers)."""
    op = reply.op
    if op == "H":
        text = f"H 1 {reply.node_name}"
    elif op == "A":
        text = f"A {reply.token} {reply.key}"
    elif op in ("T", "B", "R", "N", "X", "G"):
        text = f"{op} {reply.key}"
    elif op == "P":
        text = "P"
    elif op == "M":
        text = f"M {reply.address or '-'}"
    else:
        text = f"E {reply.code} {reply.text}" if reply.text else f"E {reply.code}"
    return text.encode("utf-8") + b"\n"


def parse_request(line: bytes) -> Request:
    """Parses one request line (what a server does); raises WireError with the server's code."""
    fields = _fields(line)
    op = fields[0]
    n = len(fields)
    if op == b"A":
        if n != 4:
            raise WireError("proto", "expected 4 fields")
        key = _key(fields[1])
        wait = _number(fields[2], "wait", 0, MAX_WAIT_SECONDS)
        lease = _number(fields[3], "lease", MIN_LEASE_SECONDS, MAX_LEASE_SECONDS)
        return Request("A", key=key, wait=wait, lease=lease)
    if op == b"R":
        if n != 3:
            raise WireError("proto", "expected 3 fields")
        key = _key(fields[1])
        return Request("R", key=key, token=_number(fields[2], "token", MIN_TOKEN, MAX_TOKEN))
    if op == b"X":
        if n != 4:
            raise WireError("proto", "expected 4 fields")
        key = _key(fields[1])
        token = _number(fields[2], "token", MIN_TOKEN, MAX_TOKEN)
        lease = _number(fields[3], "lease", MIN_LEASE_SECONDS, MAX_LEASE_SECONDS)
        return Request("X", key=key, token=token, lease=lease)
    if op == b"P":
        if n != 1:
            raise WireError("proto", "expected 1 field")
        return Request("P")
    if op == b"H":
        if n not in (2, 3):
            raise WireError("proto", "expected 2 or 3 fields")
        _number(fields[1], "protocol version", 1, 1)
        client_token = _word(fields[2], "client token") if n == 3 else None
        return Request("H", client_token=client_token)
    raise WireError("proto", "unknown op")


def format_request(request: Request) -> bytes:
    """The request line, ``\\n`` included. The caller validated the fields."""
    op = request.op
    if op == "A":
        return f"A {request.key} {request.wait} {request.lease}\n".encode("utf-8")
    if op == "R":
        return f"R {request.key} {request.token}\n".encode("utf-8")
    if op == "X":
        return f"X {request.key} {request.token} {request.lease}\n".encode("utf-8")
    if op == "P":
        return b"P\n"
    if request.client_token is None:
        return b"H 1\n"
    return f"H 1 {request.client_token}\n".encode("utf-8")


def key_error(key: object) -> Optional[str]:
    """Why ``key`` cannot be sent as a key, or None when it can."""
    if not isinstance(key, str) or key == "":
        return "a key must be a non-empty string"
    try:
        data = key.encode("utf-8")
    except UnicodeEncodeError:
        return "a key must be valid Unicode (no lone surrogates)"
    if len(data) > MAX_KEY_BYTES:
        return f"a key is at most {MAX_KEY_BYTES} bytes of UTF-8 (this one has {len(data)})"
    if any(b < 0x21 or b == 0x7F for b in data):
        return "a key cannot contain spaces or control characters"
    return None


def is_host_port(address: str) -> bool:
    """``host:port`` with a port 1..65535; IPv6 hosts in brackets."""
    colon = address.rfind(":")
    if colon <= 0:
        return False
    port = address[colon + 1 :]
    if _PORT.fullmatch(port) is None or int(port) > 65535:
        return False
    host = address[:colon]
    if host.startswith("["):
        return host.endswith("]") and len(host) > 2
    return ":" not in host


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` -> (host, port), brackets removed from an IPv6 host. The address was checked."""
    colon = address.rfind(":")
    host = address[:colon]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(address[colon + 1 :])


class LineFramer:
    """Splits a byte stream into lines; ``toolong`` once a line passes 512 bytes (plus ``\\r``)."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def push(self, data: bytes) -> Union[list[bytes], WireError]:
        buf = self._buf + data if self._buf else data
        lines = buf.split(b"\n")
        self._buf = lines.pop()
        if len(self._buf) > MAX_LINE_BYTES + 1:
            return WireError("toolong", "reply longer than 512 bytes")
        out: list[bytes] = []
        for line in lines:
            if line.endswith(b"\r"):
                line = line[:-1]
            if len(line) > MAX_LINE_BYTES:
                return WireError("toolong", "reply longer than 512 bytes")
            out.append(line)
        return out
