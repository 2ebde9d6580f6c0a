"""Reading a header: the first of its name, as every consumer of headers does."""

from __future__ import annotations

import pytest

from streams.wire.headers import Header, header


@pytest.mark.parametrize(
    ("headers", "found"),
    [
        pytest.param([("a", b"1"), ("name", b"first"), ("name", b"second")], b"first",
                     id="first-of-repeated"),
        pytest.param([("name", b"")], b"", id="empty-value"),
        pytest.param([("other", b"x")], None, id="absent"),
        pytest.param([("Name", b"x")], None, id="case-sensitive"),
        pytest.param([], None, id="no-headers"),
        pytest.param(None, None, id="none"),
        pytest.param((("name", b"t"),), b"t", id="tuple"),
    ],
)
def test_header(headers: list[Header] | None, found: bytes | None) -> None:
    assert header(headers, "name") == found
