"""In-memory stand-ins for the stores the processors write to."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from streams.adapters.db.stale_marks import StaleMark
from streams.stores import CacheUnavailable
from streams.testing.memory import FakeChatModel, FakeMemoryProvider
from streams.wire.envelope import Outgoing, SourceRecord

__all__ = ["DatabaseDown", "FakeCache", "FakeChatModel", "FakeMemoryProvider",
           "FakeMessageStore", "FakePublisher", "FakeStaleMarkStore", "FakeTable", "FlakyError"]


class FlakyError(Exception):
    pass


class DatabaseDown(ConnectionError):
    """What the driver raises when the database is unreachable (a transient error)."""


class FakeMessageStore:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.fail_next = 0
        self.calls = 0
        self.closed_sessions: dict[tuple[str, str], int] = {}
        self.probes = 0

    async def store(self, rows: Sequence[dict[str, Any]]) -> set[tuple[str, str]]:
        self.calls += 1
        if self.fail_next:
            self.fail_next -= 1
            raise DatabaseDown("database unavailable")
        have = {(r["tenant_id"], r["event_id"]) for r in self.rows}
        new = set()
        for r in rows:
            k = (r["tenant_id"], r["event_id"])
            if k not in have:
                have.add(k)
                new.add(k)
                self.rows.append(dict(r))
        return new

    async def last_closed_sessions(
        self, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], int]:
        return {k: self.closed_sessions[k] for k in keys if k in self.closed_sessions}

    async def remember_closed_sessions(self, marks: Mapping[tuple[str, str], int],
                                       now: Any) -> None:
        if not marks:
            return
        if self.fail_next:
            self.fail_next -= 1
            raise DatabaseDown("database unavailable")
        self.closed_sessions.update(marks)

    async def probe(self) -> None:
        self.probes += 1


class FakeCache:
    enabled = True

    def __init__(self) -> None:
        self.lists: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.failing = False
        self.invalidated: list[tuple[str, str]] = []
        self.fresh_seen: set[tuple[str, str]] = set()
        self.summaries: dict[tuple[str, str], dict[str, Any]] = {}

    async def append(self, new_messages: Mapping[tuple[str, str], Sequence[dict[str, Any]]], *,
                     fresh: Iterable[tuple[str, str]] = (),
                     invalidate: Iterable[tuple[str, str]] = ()) -> None:
        if self.failing:
            raise CacheUnavailable("redis down")
        fresh = set(fresh)
        self.fresh_seen |= fresh
        drop = set(invalidate)
        for k in drop:
            self.invalidated.append(k)
            self.lists.pop(k, None)
        for k, docs in new_messages.items():
            if k in drop:  # deleted instead of appended to
                continue
            if k in fresh:
                self.lists.setdefault(k, [])
            if k in self.lists:
                self.lists[k] = list(reversed(docs)) + self.lists[k]


    async def forget(self, conversations: Iterable[tuple[str, str]]) -> int:
        n = 0
        for key in conversations:
            n += (self.lists.pop(key, None) is not None) + (
                self.summaries.pop(key, None) is not None)
        return n

    async def count(self, conversations: Iterable[tuple[str, str]]) -> int:
        return sum((k in self.lists) + (k in self.summaries) for k in conversations)

    async def forget_tenant(self, tenant_id: str, *, dry_run: bool = False) -> int:
        keys = {k for k in [*self.lists, *self.summaries] if k[0] == tenant_id}
        return await (self.count(keys) if dry_run else self.forget(keys))

    async def set_summary(self, tenant_id: str, conversation_id: str,
                          summary: dict[str, Any]) -> None:
        if self.failing:
            raise CacheUnavailable("redis down")
        self.summaries[(tenant_id, conversation_id)] = summary


class FakeStaleMarkStore:
    """``stale_history_mark`` in memory. ``fail_next``: the next n calls raise
    a connection error, as the driver does when the database is unreachable."""

    def __init__(self) -> None:
        self.marks: dict[tuple[str, str], int] = {}
        self.fail_next = 0
        self.calls = 0
        self._ids = itertools.count(1)

    def _call(self) -> None:
        self.calls += 1
        if self.fail_next:
            self.fail_next -= 1
            raise ConnectionRefusedError("database unavailable")

    async def mark(self, keys: Iterable[tuple[str, str]], now: datetime) -> int:
        self._call()
        mark_id = next(self._ids)
        for k in keys:
            self.marks[k] = mark_id
        return mark_id

    async def get(self, tenant_id: str, conversation_id: str) -> StaleMark | None:
        self._call()
        mark_id = self.marks.get((tenant_id, conversation_id))
        return None if mark_id is None else StaleMark(tenant_id, conversation_id, mark_id)

    async def page(self, after: tuple[str, str] | None, limit: int) -> list[StaleMark]:
        self._call()
        keys = sorted(k for k in self.marks if after is None or k > after)[:limit]
        return [StaleMark(t, c, self.marks[(t, c)]) for t, c in keys]

    async def clear(self, marks: Sequence[StaleMark]) -> dict[tuple[str, str], int]:
        self._call()
        for m in marks:
            if self.marks.get(m.key) == m.mark_id:
                del self.marks[m.key]
        return {m.key: self.marks[m.key] for m in marks if m.key in self.marks}


class FakePublisher:
    def __init__(self) -> None:
        self.sent: list[Outgoing] = []
        self.fail_next = 0

    async def publish(self, records: Sequence[Outgoing]) -> None:
        if self.fail_next:
            self.fail_next -= 1
            raise FlakyError("broker unavailable")
        self.sent.extend(records)

    def on(self, topic: str) -> list[Outgoing]:
        return [r for r in self.sent if r.topic == topic]


class FakeTable:
    def __init__(self) -> None:
        self.data: dict[str, dict[str, Any]] = {}
        self.writes = 0
        self.in_context: SourceRecord | None = None

    def get(self, key: str) -> dict[str, Any] | None:
        return self.data.get(key)

    def set(self, key: str, value: dict[str, Any]) -> None:
        assert self.in_context is not None, "table written outside an event context"
        self.writes += 1
        self.data[key] = value

    def delete(self, key: str) -> None:
        assert self.in_context is not None, "table written outside an event context"
        self.writes += 1
        self.data.pop(key, None)

    def stored_keys(self) -> list[str]:
        return list(self.data)

    @contextmanager
    def context(self, record: SourceRecord) -> Iterator[None]:
        self.in_context = record
        try:
            yield
        finally:
            self.in_context = None
