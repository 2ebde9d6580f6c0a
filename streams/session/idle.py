"""IdleScanner: finds idle sessions in this worker's part of the sessions table.

It also finds the states that need the ingest agent for something else: a
closed session whose closing event is still in the state's outbox (a crash
came between writing the state and publishing the event), and a closed
conversation quiet for the retention, which leaves the table.

Faust forbids table writes outside stream iteration, so the scan itself never
closes anything: it returns :class:`~streams.wire.records.IdleCheck` records, which
the caller publishes to the idle-check topic (keyed by conversation, so they
land on the partition that owns the conversation's state). The ingest agent
consumes that topic and re-checks the state before closing the session.

A check is sent once per idle session: the scanner remembers what it sent
(session number and last activity) and sends again only if the session moved
on, or after ``resend_after_s`` when the first check may have been lost (a
rebalance, say). Sending twice is harmless: the ingest agent closes a session
once.

A tick touches only the states due (:mod:`streams.session.rules.idle_due`): the
scanner keeps each state's moment of becoming due in a heap, updated as the
ingest agent writes the table (:class:`WatchedSessions`). The whole table is
read only when the scanner is told its part changed (a rebalance, a recovery:
:meth:`IdleScanner.rescan`) and at the first tick. The worker reads it in parts
(:meth:`IdleScanner.tick_in_parts`): the keys at once, then ``chunk`` states at a
time, the event loop free between parts (queries share it); a state written
meanwhile is taken as written, and a rescan asked meanwhile reads the table again
at the next tick.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any

from streams.session.ports import SessionTable
from streams.session.rules.idle_due import (
    IdleTimes,
    Sent,
    Watch,
    due,
    due_from,
    look,
    watch_of,
)
from streams.wire.envelope import Outgoing, SourceRecord
from streams.wire.records import IdleCheck

log = logging.getLogger(__name__)
Items = Iterable[tuple[str, dict[str, Any] | None]]
REBUILD_CHUNK = 2000  # states read between two turns of the event loop


async def _next_turn() -> None:
    await asyncio.sleep(0)


class IdleScanner:
    def __init__(
        self,
        *,
        timeout_s: float,
        resend_after_s: float,
        retention_s: float = float("inf"),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.times = IdleTimes(timeout_s, resend_after_s, retention_s)
        self.clock = clock
        self._watch: dict[str, Watch] = {}
        self._heap: list[tuple[float, int, str, Watch]] = []  # (look at, tie, key, state)
        self._ties = 0
        self._sent: dict[str, Sent] = {}
        self._written: set[str] = set()  # keys with a check sent, written since the last tick
        self._stale = True  # the whole table is read at the next tick
        self._rescans = 0  # rescans asked for, to tell one asked during a rebuild in parts
        self._meanwhile: dict[str, dict[str, Any] | None] | None = None  # written, rebuilding
        self.open_sessions = 0
        self.visited = 0  # states looked at by the last tick

    # ------------------------------------------------------------ the index
    def rescan(self) -> None:
        """This worker's part of the table changed beneath the scanner (partitions
        assigned or revoked, a table recovered): the next tick reads all of it."""
        self._stale = True
        self._rescans += 1

    def changed(self, key: str, value: dict[str, Any] | None) -> None:
        """``key`` was written (None: deleted)."""
        if self._meanwhile is not None:  # a rebuild in parts: applied once it is done
            self._meanwhile[key] = value
            return
        try:
            w = watch_of(value)
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("sessions-table value of %r unreadable (%s): the table is read "
                        "whole at the next scan", key, type(exc).__name__)
            self._stale = True
            return
        old = self._watch.pop(key, None)
        self.open_sessions += (w is not None and w.open) - (old is not None and old.open)
        if key in self._sent:
            self._written.add(key)
        if w is not None:
            self._watch[key] = w
            self._push(key, w, due_from(w, self.times))

    def _push(self, key: str, w: Watch, at: float | None) -> None:
        if at is None:
            return
        self._ties += 1
        heapq.heappush(self._heap, (at, self._ties, key, w))
        if len(self._heap) > 2 * len(self._watch) + 1024:  # superseded entries: rebuild
            self._heap = [e for e in self._heap if self._watch.get(e[2]) is e[3]]
            heapq.heapify(self._heap)

    def _rebuild(self, items: Items) -> None:
        watch: dict[str, Watch] = {}
        heap: list[tuple[float, int, str, Watch]] = []
        for key, value in items:
            self._index(key, value, watch, heap)
        self._install(watch, heap)
        self._stale = False

    def _index(self, key: str, value: dict[str, Any] | None, watch: dict[str, Watch],
               heap: list[tuple[float, int, str, Watch]]) -> None:
        self.visited += 1
        try:
            w = watch_of(value)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"sessions-table value of {key!r} unreadable") from exc
        if w is None:
            return
        watch[key] = w
        if (at := due_from(w, self.times)) is not None:
            heap.append((at, len(heap), key, w))

    def _install(self, watch: dict[str, Watch], heap: list[tuple[float, int, str, Watch]],
                 ) -> None:
        heapq.heapify(heap)
        self._watch, self._heap, self._ties = watch, heap, len(heap)
        self.open_sessions = sum(w.open for w in watch.values())
        self._written = set(self._sent)  # each is looked at: gone or not due, forgotten

    async def _rebuild_in_parts(self, keys: Sequence[str],
                                get: Callable[[str], dict[str, Any] | None], chunk: int,
                                pause: Callable[[], Awaitable[None]]) -> None:
        """:meth:`_rebuild` from ``keys`` (taken at once), ``chunk`` states at a time with
        ``pause`` between: what is written meanwhile (:meth:`changed`) is applied after."""
        asked = self._rescans
        watch: dict[str, Watch] = {}
        heap: list[tuple[float, int, str, Watch]] = []
        self._meanwhile = {}
        try:
            for start in range(0, len(keys), chunk):
                if start:
                    await pause()
                for key in keys[start:start + chunk]:
                    self._index(key, get(key), watch, heap)
        finally:
            meanwhile, self._meanwhile = self._meanwhile, None
        self._install(watch, heap)
        self._stale = self._rescans != asked  # a rescan asked meanwhile: read it again
        for key, value in meanwhile.items():
            self.changed(key, value)

    # ------------------------------------------------------------- the scan
    def scan(self, items: Items) -> list[IdleCheck]:
        """Every state of ``items`` read afresh, then the checks due."""
        self.rescan()
        return self.tick(lambda: items)

    def tick(self, items: Callable[[], Items]) -> list[IdleCheck]:
        """Checks for the open sessions idle for at least the timeout, the closed ones
        with an unpublished closing event, and the expired ones; ``items`` (the table's
        states) is read only when the scanner was told to read the table again."""
        self.visited = 0
        if self._stale:
            self._rebuild(items())
        return self._due(self.clock())

    async def tick_in_parts(self, keys: Callable[[], Sequence[str]],
                            get: Callable[[str], dict[str, Any] | None], *,
                            chunk: int = REBUILD_CHUNK,
                            pause: Callable[[], Awaitable[None]] = _next_turn,
                            ) -> list[IdleCheck]:
        """:meth:`tick`, the table read (when it must be) a part at a time: ``keys``
        at once, then ``chunk`` states (``get``) between two ``pause``."""
        if chunk < 1:
            raise ValueError("chunk must be at least 1")
        self.visited = 0
        if self._stale:
            await self._rebuild_in_parts(keys(), get, chunk, pause)
        return self._due(self.clock())

    def _due(self, now: float) -> list[IdleCheck]:
        for key in self._written:
            w = self._watch.get(key)
            if w is None or not due(w, now, self.times):
                self._sent.pop(key, None)  # closed, active again, or gone
        self._written = set()
        checks: list[IdleCheck] = []
        later: list[tuple[str, Watch, float | None]] = []
        while self._heap and self._heap[0][0] <= now:
            _, _, key, w = heapq.heappop(self._heap)
            if self._watch.get(key) is not w:
                continue  # written since: a newer entry stands for it
            self.visited += 1
            seen = look(w, self._sent.get(key), now, self.times)
            if seen.sent is None:
                self._sent.pop(key, None)
            else:
                self._sent[key] = seen.sent
            if seen.send:
                checks.append(IdleCheck(
                    tenant_id=w.tenant_id, conversation_id=w.conversation_id,
                    session_seq=w.session_seq, idle_for_s=round(now - w.last_seen_at, 3),
                    checked_at=datetime.fromtimestamp(now, UTC)))
            later.append((key, w, seen.next_at))
        for key, w, at in later:
            self._push(key, w, at)
        return checks


class WatchedSessions:
    """A :class:`~streams.session.ports.SessionTable` that tells ``scanner`` of every
    write, so that its ticks read only the states due."""

    def __init__(self, table: SessionTable, scanner: IdleScanner) -> None:
        self.table = table
        self.scanner = scanner

    def get(self, key: str) -> dict[str, Any] | None:
        return self.table.get(key)

    def set(self, key: str, value: dict[str, Any]) -> None:
        self.table.set(key, value)
        self.scanner.changed(key, value)

    def stored_keys(self) -> Iterable[str]:
        return self.table.stored_keys()

    def delete(self, key: str) -> None:
        self.table.delete(key)
        self.scanner.changed(key, None)

    def context(self, record: SourceRecord) -> AbstractContextManager[None]:
        return self.table.context(record)


def idle_check_record(topic: str, check: IdleCheck) -> Outgoing:
    """The check as a record keyed like the chat topic (by conversation id)."""
    return Outgoing(topic, check.conversation_id.encode(), check.model_dump_json().encode())
