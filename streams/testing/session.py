"""In-memory doubles of the session stage's ports (:mod:`streams.session.ports`)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from streams.session.model import ConversationKey, MessageDoc, StaleMark
from streams.stores import CacheUnavailable, StoreUnavailable
from streams.wire.envelope import SourceRecord


class InMemorySessionTable:
    """:class:`~streams.session.ports.SessionTable` over a dict (``data``); ``writes``
    counts the writes. A write outside :meth:`context` fails, as it would in Faust."""

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


class InMemoryHotCopy:
    """:class:`~streams.session.ports.HotCopy` over dicts: ``lists`` (newest message
    first) and ``summaries``. ``failing``: every read and write raises
    :class:`~streams.stores.CacheUnavailable`; ``invalidated``: the lists deleted
    instead of appended to, in order; ``fresh_seen``: the conversations named fresh."""

    enabled = True

    def __init__(self, history_max: int = 200) -> None:
        self.history_max = history_max
        self.lists: dict[ConversationKey, list[MessageDoc]] = {}
        self.failing = False
        self.invalidated: list[ConversationKey] = []
        self.fresh_seen: set[ConversationKey] = set()
        self.summaries: dict[ConversationKey, dict[str, Any]] = {}

    def _check(self) -> None:
        if self.failing:
            raise CacheUnavailable("redis down")

    async def append(self, new_messages: Mapping[ConversationKey, Sequence[MessageDoc]], *,
                     fresh: Iterable[ConversationKey] = (),
                     invalidate: Iterable[ConversationKey] = ()) -> None:
        self._check()
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

    async def read(self, tenant_id: str, conversation_id: str, n: int) -> list[MessageDoc] | None:
        self._check()
        held = self.lists.get((tenant_id, conversation_id))
        return None if not held else list(reversed(held[:n]))

    async def version(self, tenant_id: str, conversation_id: str) -> bytes | None:
        self._check()
        return None

    async def backfill(self, tenant_id: str, conversation_id: str, docs: Sequence[MessageDoc],
                       seen_version: bytes | None) -> bool:
        if self.failing:
            return False
        self.lists[(tenant_id, conversation_id)] = list(reversed(docs))[: self.history_max]
        return True

    async def get_summary(self, tenant_id: str, conversation_id: str) -> dict[str, Any] | None:
        self._check()
        return self.summaries.get((tenant_id, conversation_id))

    async def set_summary(self, tenant_id: str, conversation_id: str,
                          summary: dict[str, Any]) -> None:
        self._check()
        self.summaries[(tenant_id, conversation_id)] = summary

    async def forget(self, conversations: Iterable[ConversationKey]) -> int:
        """Delete every key of ``conversations``; how many there were."""
        n = 0
        for key in conversations:
            n += (self.lists.pop(key, None) is not None) + (
                self.summaries.pop(key, None) is not None)
        return n

    async def count(self, conversations: Iterable[ConversationKey]) -> int:
        return sum((k in self.lists) + (k in self.summaries) for k in conversations)

    async def forget_tenant(self, tenant_id: str, *, dry_run: bool = False) -> int:
        keys = {k for k in [*self.lists, *self.summaries] if k[0] == tenant_id}
        return await (self.count(keys) if dry_run else self.forget(keys))


class InMemoryStaleMarks:
    """:class:`~streams.session.ports.StaleMarks` over a dict (``marks``: key -> mark
    id). ``fail_next``: the next n calls raise :class:`~streams.stores.StoreUnavailable`;
    ``calls`` counts them all."""

    def __init__(self) -> None:
        self.marks: dict[ConversationKey, int] = {}
        self.fail_next = 0
        self.calls = 0
        self._ids = itertools.count(1)

    def _call(self) -> None:
        self.calls += 1
        if self.fail_next:
            self.fail_next -= 1
            raise StoreUnavailable("database unavailable")

    async def mark(self, keys: Iterable[ConversationKey], now: datetime) -> int:
        self._call()
        mark_id = next(self._ids)
        for k in keys:
            self.marks[k] = mark_id
        return mark_id

    async def get(self, tenant_id: str, conversation_id: str) -> StaleMark | None:
        self._call()
        mark_id = self.marks.get((tenant_id, conversation_id))
        return None if mark_id is None else StaleMark(tenant_id, conversation_id, mark_id)

    async def page(self, after: ConversationKey | None, limit: int) -> list[StaleMark]:
        self._call()
        keys = sorted(k for k in self.marks if after is None or k > after)[:limit]
        return [StaleMark(t, c, self.marks[(t, c)]) for t, c in keys]

    async def clear(self, marks: Sequence[StaleMark]) -> dict[ConversationKey, int]:
        self._call()
        for m in marks:
            if self.marks.get(m.key) == m.mark_id:
                del self.marks[m.key]
        return {m.key: self.marks[m.key] for m in marks if m.key in self.marks}
