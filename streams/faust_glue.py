"""The few places memstream touches Faust internals, kept in one module.

* ``event_context``: Faust routes a table write to the partition of the
  *current event*, a context variable its stream iterator sets. Inside a batch
  from ``noack_take`` that variable belongs to the background task filling
  the buffer, so each write sets it to the event the write belongs to.
* ``source_record``: a Faust event as a library-neutral :class:`SourceRecord`.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from faust.streams import _current_event

from streams.publish import Headers, SourceRecord


@contextmanager
def event_context(event: Any) -> Iterator[None]:
    token = _current_event.set(weakref.ref(event))
    try:
        yield
    finally:
        _current_event.reset(token)


def _headers(raw: Any) -> Headers:
    if not raw:
        return []
    items = raw.items() if isinstance(raw, dict) else raw
    return [(str(k), bytes(v) if v is not None else b"") for k, v in items]


def source_record(event: Any) -> SourceRecord:
    m = event.message
    return SourceRecord(
        topic=m.topic,
        partition=m.partition,
        offset=m.offset,
        key=m.key,
        value=m.value,
        headers=_headers(m.headers),
        timestamp=m.timestamp,
        handle=event,
    )


class FaustTable:
    """A Faust table behind the ``SessionTable`` protocol."""

    def __init__(self, table: Any) -> None:
        self._table = table

    def get(self, key: str) -> dict[str, Any] | None:
        value = self._table.get(key)
        return None if value is None else dict(value)

    def set(self, key: str, value: dict[str, Any]) -> None:
        self._table[key] = value

    def delete(self, key: str) -> None:
        self._table.pop(key, None)

    @contextmanager
    def context(self, record: SourceRecord) -> Iterator[None]:
        with event_context(record.handle):
            yield

    def items(self) -> list[tuple[str, dict[str, Any]]]:
        return [(k, dict(v)) for k, v in self._table.items() if v is not None]
