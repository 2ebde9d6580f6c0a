"""In-memory stand-ins for the stores the processors write to."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from streams.cache import CacheUnavailableError
from streams.publish import Outgoing, SourceRecord


class FlakyError(Exception):
    pass


class FakeMessageStore:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.fail_next = 0
        self.calls = 0

    async def store(self, rows: Sequence[dict[str, Any]]) -> set[tuple[str, str]]:
        self.calls += 1
        if self.fail_next:
            self.fail_next -= 1
            raise FlakyError("database unavailable")
        have = {(r["tenant_id"], r["event_id"]) for r in self.rows}
        new = set()
        for r in rows:
            k = (r["tenant_id"], r["event_id"])
            if k not in have:
                have.add(k)
                new.add(k)
                self.rows.append(dict(r))
        return new


class FakeCache:
    enabled = True

    def __init__(self) -> None:
        self.lists: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.failing = False
        self.invalidated: list[tuple[str, str]] = []
        self.fresh_seen: set[tuple[str, str]] = set()

    async def append(self, new_messages: Mapping[tuple[str, str], Sequence[dict[str, Any]]], *,
                     fresh: Iterable[tuple[str, str]] = (),
                     invalidate: Iterable[tuple[str, str]] = ()) -> None:
        if self.failing:
            raise CacheUnavailableError("redis down")
        fresh = set(fresh)
        self.fresh_seen |= fresh
        for k in invalidate:
            self.invalidated.append(k)
            self.lists.pop(k, None)
        for k, docs in new_messages.items():
            if k in fresh:
                self.lists.setdefault(k, [])
            if k in self.lists:
                self.lists[k] = list(reversed(docs)) + self.lists[k]


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

    @contextmanager
    def context(self, record: SourceRecord) -> Iterator[None]:
        self.in_context = record
        try:
            yield
        finally:
            self.in_context = None
