"""In-memory stand-ins for the stores the processors write to. The doubles of the
ingest and session stages' ports, and the publisher, live in :mod:`streams.testing`;
``FakeCache``, ``FakePublisher`` and ``FakeTable`` name them here too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from streams.adapters.http.client import (
    ProviderRequestRejected,
    ProviderTimeout,
    ProviderUnavailable,
)
from streams.adapters.http.openai_compat import ChatResult
from streams.memory.model import StoredMemory
from streams.memory.provider import WriteResult
from streams.testing.outbox import RecordingPublisher as FakePublisher  # noqa: F401
from streams.testing.session import InMemoryHotCopy as FakeCache  # noqa: F401
from streams.testing.session import InMemorySessionTable as FakeTable  # noqa: F401
from tests.fakes.server import overlap_score


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
