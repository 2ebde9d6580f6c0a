"""Kafka record headers as memstream passes them: ``(name, value)`` pairs in
record order, a name possibly repeated. Names are text, values bytes."""

from __future__ import annotations

from collections.abc import Sequence

Header = tuple[str, bytes]
Headers = list[Header]


def header(headers: Sequence[Header] | None, name: str) -> bytes | None:
    """The value of the first header called ``name``; None when there is none."""
    for k, v in headers or ():
        if k == name:
            return v
    return None
