"""docs/client-python.md's error table and ticketing_client.errors agree (codes, classes, order)."""

from __future__ import annotations

import re

import ticketing_client
from ticketing_client.errors import ERROR_CLASSES, ERROR_CODES

from servers import REPO


def test_the_table_lists_every_error_class_with_its_code() -> None:
    text = (REPO / "docs" / "client-python.md").read_text("utf-8")
    rows = re.findall(r"^\| `([A-Z_]+)` \| `(\w+)` \|", text, re.M)
    assert rows == [(c.code, c.__name__) for c in ERROR_CLASSES]
    assert tuple(code for code, _ in rows) == ERROR_CODES


def test_every_error_class_is_exported_and_the_codes_match_the_other_clients() -> None:
    for cls in ERROR_CLASSES:
        assert getattr(ticketing_client, cls.__name__) is cls
        assert issubclass(cls, ticketing_client.TicketingError)
    # The TypeScript and JVM clients' codes (CLIENT.md "Errors").
    assert set(ERROR_CODES) == {
        "INVALID_ARGUMENT", "NO_CONNECTION", "TIMEOUT", "CAPACITY", "INDETERMINATE", "INSUFFICIENT_LEASE",
        "LEASE_ENDED", "RELEASED", "RELEASE_FAILED", "CLOSED", "PROTOCOL", "AUTH", "PERMISSION",
    }
