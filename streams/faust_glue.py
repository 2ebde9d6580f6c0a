"""The few places memstream touches Faust internals, kept in one module.

* ``event_context``: Faust routes a table write to the partition of the
  *current event*, a context variable its stream iterator sets. Inside a batch
  from ``noack_take`` that variable belongs to the background task filling
  the buffer, so each write sets it to the event the write belongs to.
* ``source_record``: a Faust event as a library-neutral :class:`SourceRecord`.
* ``timer``: ``app.timer`` with a type (Faust's decorator has none).
* ``seek_uncommitted_to_start``: after a rebalance Faust seeks every stream
  partition back to its committed offset, through aiokafka's
  ``seek_to_committed``, which seeks only when the offset is above 0. Records
  fetched meanwhile (during table recovery, when Faust silently drops what it
  fetched for partitions it has not resumed) are then never delivered on a
  partition whose committed offset is 0 (a group rewound to the start) or
  absent (nothing committed yet): a backlog there waits for the next restart.
  The patch seeks such partitions to their start (the app resets to
  ``earliest``); at worst a record is processed twice, which every sink
  tolerates.
* ``topic_global_table``: a global table over an existing topic. Faust's
  assignor looks a global table's changelog up by its *default* name
  (``{app_id}-{table}-changelog``), not by the ``changelog_topic`` given, and
  fails the assignment with a ``KeyError``; the subclass answers with the
  topic's real name.
* ``QuietWorker``: at log levels warn and above, Faust's worker spins a
  terminal spinner on every log record and, to feed it, sets the root logger to
  DEBUG: every debug line of Faust and aiokafka then builds a record (about a
  tenth of the ingest worker's time). This worker has no spinner.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast

import faust
from faust.streams import _current_event
from faust.tables.globaltable import GlobalTable
from faust.transport.consumer import Consumer

from streams.publish import Headers, SourceRecord


@contextmanager
def event_context(event: Any) -> Iterator[None]:
    token = _current_event.set(weakref.ref(event))
    try:
        yield
    finally:
        _current_event.reset(token)


class _TopicGlobalTable(GlobalTable):
    def _changelog_topic_name(self) -> str:
        if self._changelog_topic is not None:
            return str(self._changelog_topic.get_topic_name())
        return str(super()._changelog_topic_name())


def topic_global_table(app: Any, name: str, *, topic: Any, help: str) -> Any:
    """A read-only global table holding ``topic`` (raw bytes keys and values),
    which other producers write to. Every worker reads all of it, and keeps
    reading after recovery (``synchronize_all_active_partitions``: no worker is
    the writer). One partition and a recovery buffer of one, as Faust advises
    for global tables shared by several workers."""
    return app.tables.add(_TopicGlobalTable(
        app, name=name, default=None, beacon=app.tables.beacon, partitions=1,
        standby_buffer_size=1, recovery_buffer_size=1, is_global=True,
        synchronize_all_active_partitions=True, changelog_topic=topic, key_type=bytes,
        value_type=bytes, help=help,
    ))


_original_perform_seek = Consumer.perform_seek


async def _perform_seek(self: Any) -> None:
    await _original_perform_seek(self)
    if str(self.app.conf.consumer_auto_offset_reset) != "earliest":
        return
    changelogs = set(self.app.tables.changelog_topics)
    for tp in self.assignment():
        if tp.topic not in changelogs and self._committed_offset.get(tp) is None:
            await self.seek(tp, 0)  # below the log start, the "earliest" reset applies


def seek_uncommitted_to_start() -> None:
    """Install the seek fix described in the module docstring (idempotent)."""
    setattr(Consumer, "perform_seek", _perform_seek)  # noqa: B010  (a method on a class)


TimerFn = Callable[[], Awaitable[None]]


def timer(app: Any, interval_s: float, *, name: str,
          on_leader: bool = False) -> Callable[[TimerFn], TimerFn]:
    """``@app.timer``: run the coroutine every ``interval_s`` (on the leader only
    with ``on_leader``). A timer may read tables but never write them."""
    return cast(Callable[[TimerFn], TimerFn],
                app.timer(interval_s, on_leader=on_leader, name=name))


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


class QuietWorker(faust.Worker):
    def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
        self.spinner = None
        super().on_setup_root_logger(logger, level)
