"""In-memory stand-ins for the stores the processors write to."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from streams.adapters.db.stale_marks import StaleMark
from streams.adapters.http.client import (
    ProviderRequestRejected,
    ProviderTimeout,
    ProviderUnavailable,
)
from streams.adapters.http.openai_compat import ChatResult
from streams.memory.model import StoredMemory
from streams.memory.provider import WriteResult
from streams.stores import CacheUnavailable
from streams.wire.envelope import Outgoing, SourceRecord
from tests.fakes.server import overlap_score


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


# ------------------------------------------------------------------ providers
class FakeMemoryProvider:
    """An in-memory long-term memory provider (built-in provider semantics:
    expiring marks a memory invalid, it is never deleted).

    ``fail_adds``: the next n ``add`` calls raise a retryable error before
    storing; ``lose_answers``: the next n ``add`` calls store, then raise a
    timeout (the answer was lost). ``fail_expires`` likewise for ``expire``.
    """

    def __init__(self, name: str = "mysql") -> None:
        self.name = name
        self.memories: dict[str, dict[str, Any]] = {}
        self.fail_adds = 0
        self.lose_answers = 0
        self.fail_expires = 0
        self.fail_searches = 0
        self.permanent = False
        self.add_calls = 0
        self.search_calls = 0
        self._n = 0

    def _error(self, what: str) -> Exception:
        cls = ProviderRequestRejected if self.permanent else ProviderUnavailable
        return cls(f"fake {what} failed", provider=self.name, operation=what)

    async def add(self, scope: Any, cube: str, memories: Sequence[Any]) -> Any:
        self.add_calls += 1
        if self.fail_adds:
            self.fail_adds -= 1
            raise self._error("add")
        ids = []
        for m in memories:
            self._n += 1
            mid = f"m{self._n}"
            self.memories[mid] = {"scope": scope, "cube": cube, "memory": m, "valid": True,
                                  "superseded_by": None}
            ids.append(mid)
        if self.lose_answers:
            self.lose_answers -= 1
            raise ProviderTimeout("answer lost", provider=self.name, operation="add")
        return WriteResult(ids=ids)

    def _visible(self, scope: Any, cube: str, row: dict[str, Any]) -> bool:
        s = row["scope"]
        same_owner = s.user_id == scope.user_id if cube == "user_profile" else True
        return row["cube"] == cube and s.tenant_id == scope.tenant_id and same_owner

    async def search(self, scope: Any, request: Any) -> list[Any]:
        self.search_calls += 1
        if self.fail_searches:
            self.fail_searches -= 1
            raise self._error("search")
        out = []
        for mid, row in self.memories.items():
            if not row["valid"] or not any(self._visible(scope, c, row) for c in request.cubes):
                continue
            m = row["memory"]
            score = overlap_score(request.query, m.content)
            if score <= 0 or score < request.relativity:
                continue
            out.append(StoredMemory(mid, m.content, row["cube"], m.type, m.scope, score,
                                    m.importance, m.event_time, m.source_event_ids, m.kind))
        return sorted(out, key=lambda m: m.score, reverse=True)[: request.top_k]

    async def expire(self, scope: Any, cube: str, memory_ids: Sequence[str],
                     superseded_by: str | None) -> None:
        if self.fail_expires:
            self.fail_expires -= 1
            raise self._error("expire")
        for mid in memory_ids:
            row = self.memories.get(mid)
            if row is not None and row["valid"]:
                row["valid"] = False
                row["superseded_by"] = superseded_by

    def valid(self, kind: str | None = None) -> list[str]:
        return [r["memory"].content for r in self.memories.values()
                if r["valid"] and (kind is None or r["memory"].kind == kind)]

    def contents(self, kind: str | None = None) -> list[str]:
        return [r["memory"].content for r in self.memories.values()
                if kind is None or r["memory"].kind == kind]


class FakeChatModel:
    """A chat model answering from a script (strings, or exceptions to raise)."""

    def __init__(self, *answers: Any, model: str = "fake-model") -> None:
        self.model = model
        self.answers = list(answers)
        self.calls: list[tuple[str, list[dict[str, str]]]] = []
        self.default: Any = "[]"

    async def complete(self, messages: list[dict[str, str]], *, purpose: str,
                       temperature: float = 0.0, max_tokens: int | None = None,
                       json_mode: bool = False) -> Any:
        self.calls.append((purpose, messages))
        answer = self.answers.pop(0) if self.answers else self.default
        if callable(answer):
            answer = answer(purpose, messages)
        if isinstance(answer, Exception):
            raise answer
        return ChatResult(text=answer, prompt_tokens=1, completion_tokens=1)

    def purposes(self) -> list[str]:
        return [p for p, _ in self.calls]
