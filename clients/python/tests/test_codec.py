"""The codec against testdata/wire-vectors.txt (shared with the TypeScript and JVM codecs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from ticketing_client._wire import LineFramer, WireError, format_reply, format_request, parse_reply, parse_request

VECTORS = Path(__file__).resolve().parents[3] / "testdata" / "wire-vectors.txt"


@dataclass
class Vector:
    dir: str
    source: str
    data: bytes
    expected: str  # "ok" or an error code
    line_no: int


def unescape(text: str) -> bytes:
    out = bytearray()
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        n = text[i + 1]
        if n == "\\":
            out.append(0x5C)
            i += 2
        elif n == "t":
            out.append(0x09)
            i += 2
        elif n == "r":
            out.append(0x0D)
            i += 2
        elif n == "x":
            out.append(int(text[i + 2 : i + 4], 16))
            i += 4
        elif n == "=":
            count = int(text[i + 2 : i + 5])
            out += text[i + 5].encode("utf-8") * count
            i += 6
        else:
            raise ValueError(f"bad escape \\{n} in {text!r}")
    return bytes(out)


def load() -> list[Vector]:
    vectors = []
    for idx, line in enumerate(VECTORS.read_text("utf-8").split("\n")):
        if line == "" or line.startswith("#"):
            continue
        parts = line.split("\t")
        assert len(parts) == 3 and parts[0] in ("req", "rep"), f"malformed vector at line {idx + 1}"
        expected = parts[2].removeprefix("err ")
        vectors.append(Vector(parts[0], parts[1], unescape(parts[1]), expected, idx + 1))
    return vectors


ALL = load()


def test_the_file_has_both_directions() -> None:
    assert len([v for v in ALL if v.dir == "req"]) > 30
    assert len([v for v in ALL if v.dir == "rep"]) > 30


@pytest.mark.parametrize("v", ALL, ids=[f"{v.line_no}:{v.dir}:{v.source[:30]}" for v in ALL])
def test_vector(v: Vector) -> None:
    parse = parse_request if v.dir == "req" else parse_reply
    fmt = format_request if v.dir == "req" else format_reply
    if v.expected == "ok":
        parsed = parse(v.data)
        assert fmt(parsed) == v.data + b"\n"  # type: ignore[arg-type]
    else:
        with pytest.raises(WireError) as info:
            parse(v.data)
        assert info.value.code == v.expected


def test_framer_splits_lines_and_strips_cr() -> None:
    f = LineFramer()
    assert f.push(b"P\r\nT k\nA 1") == [b"P", b"T k"]
    assert f.push(b" k\n") == [b"A 1 k"]


def test_framer_rejects_a_line_over_512_bytes_before_its_newline() -> None:
    assert isinstance(LineFramer().push(b"x" * 514), WireError)
    assert isinstance(LineFramer().push(b"x" * 513 + b"\n"), WireError)
    assert LineFramer().push(b"x" * 512 + b"\r\n") == [b"x" * 512]


def test_tokens_stay_exact_u64() -> None:
    r = parse_reply(b"A 18446744073709551615 k")
    assert r.token == 2**64 - 1
    assert parse_reply(b"A 9007199254740993 k").token == 9007199254740993
