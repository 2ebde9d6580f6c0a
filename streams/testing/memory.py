"""In-memory doubles of memory's ports: a long-term memory provider
(:class:`~streams.memory.provider.MemoryProvider`) and a chat model
(:class:`~streams.memory.provider.ChatCompleter`).

Both fail on request with the provider error tree's own errors.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from streams.memory.model import USER_CUBE, MemoryCandidate, StoredMemory
from streams.memory.provider import (
    ChatResult,
    ModelCaller,
    ProviderError,
    ProviderRequestRejected,
    ProviderTimeout,
    ProviderUnavailable,
    Scope,
    SearchRequest,
    WriteResult,
)

_TOKEN = re.compile(r"[0-9a-z]+|[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def overlap_score(query: str, text: str) -> float:
    """Token-set cosine in 0..1 (lower-cased words, single CJK characters): how the
    double ranks memories for a query."""
    q, t = set(_TOKEN.findall(query.lower())), set(_TOKEN.findall(text.lower()))
    if not q or not t:
        return 0.0
    return round(len(q & t) / math.sqrt(len(q) * len(t)), 6)


@dataclass
class HeldMemory:
    """A memory the double holds, and whether it is still valid."""

    scope: Scope
    cube: str
    memory: MemoryCandidate
    valid: bool = True
    superseded_by: str | None = None


class FakeMemoryProvider:
    """An in-memory long-term memory provider (built-in provider semantics:
    expiring marks a memory invalid, it is never deleted).

    ``fail_adds``: the next n ``add`` calls raise a retryable error before
    storing (a permanent one when ``permanent``); ``lose_answers``: the next n
    ``add`` calls store, then raise a timeout (the answer was lost).
    ``fail_expires`` and ``fail_searches`` likewise for ``expire`` and ``search``.
    """

    def __init__(self, name: str = "mysql") -> None:
        self.name = name
        self.memories: dict[str, HeldMemory] = {}
        self.fail_adds = 0
        self.lose_answers = 0
        self.fail_expires = 0
        self.fail_searches = 0
        self.permanent = False
        self.add_calls = 0
        self.search_calls = 0
        self._n = 0

    def _error(self, what: str) -> ProviderError:
        cls = ProviderRequestRejected if self.permanent else ProviderUnavailable
        return cls(f"fake {what} failed", provider=self.name, operation=what)

    async def add(self, scope: Scope, cube: str,
                  memories: Sequence[MemoryCandidate]) -> WriteResult:
        self.add_calls += 1
        if self.fail_adds:
            self.fail_adds -= 1
            raise self._error("add")
        ids = []
        for m in memories:
            self._n += 1
            mid = f"m{self._n}"
            self.memories[mid] = HeldMemory(scope, cube, m)
            ids.append(mid)
        if self.lose_answers:
            self.lose_answers -= 1
            raise ProviderTimeout("answer lost", provider=self.name, operation="add")
        return WriteResult(ids=ids)

    @staticmethod
    def _visible(scope: Scope, cube: str, held: HeldMemory) -> bool:
        same_owner = held.scope.user_id == scope.user_id if cube == USER_CUBE else True
        return held.cube == cube and held.scope.tenant_id == scope.tenant_id and same_owner

    async def search(self, scope: Scope, request: SearchRequest) -> list[StoredMemory]:
        self.search_calls += 1
        if self.fail_searches:
            self.fail_searches -= 1
            raise self._error("search")
        out = []
        for mid, held in self.memories.items():
            if not held.valid or not any(self._visible(scope, c, held) for c in request.cubes):
                continue
            m = held.memory
            score = overlap_score(request.query, m.content)
            if score <= 0 or score < request.relativity:
                continue
            out.append(StoredMemory(mid, m.content, held.cube, m.type, m.scope, score,
                                    m.importance, m.event_time, m.source_event_ids, m.kind))
        return sorted(out, key=lambda m: m.score, reverse=True)[: request.top_k]

    async def expire(self, scope: Scope, cube: str, memory_ids: Sequence[str],
                     superseded_by: str | None) -> None:
        if self.fail_expires:
            self.fail_expires -= 1
            raise self._error("expire")
        for mid in memory_ids:
            held = self.memories.get(mid)
            if held is not None and held.valid:
                held.valid = False
                held.superseded_by = superseded_by

    async def forget(self, scope: Scope, cube: str, memory_ids: Sequence[str]) -> int:
        gone = [mid for mid in memory_ids if mid in self.memories
                and self._visible(scope, cube, self.memories[mid])]
        for mid in gone:
            del self.memories[mid]
        return len(gone)

    async def forget_cube(self, scope: Scope, cube: str) -> int:
        return await self.forget(scope, cube, list(self.memories))

    def valid(self, kind: str | None = None) -> list[str]:
        return [h.memory.content for h in self.memories.values()
                if h.valid and (kind is None or h.memory.kind == kind)]

    def contents(self, kind: str | None = None) -> list[str]:
        return [h.memory.content for h in self.memories.values()
                if kind is None or h.memory.kind == kind]


Messages: TypeAlias = list[dict[str, str]]
Answer: TypeAlias = (str | Exception
                     | Callable[[str, Messages], "str | Exception | Awaitable[str]"])
"""A scripted answer: its text, an error to raise, or a function of the purpose and
the messages giving either (or awaiting the text)."""


class FakeChatModel:
    """A chat model answering from a script (:data:`Answer`\\ s, in order; then
    ``default``). ``calls`` records each call's purpose and messages, ``callers`` whom
    each was for."""

    def __init__(self, *answers: Answer, model: str = "fake-model") -> None:
        self.model = model
        self.answers: list[Answer] = list(answers)
        self.calls: list[tuple[str, Messages]] = []
        self.callers: list[ModelCaller] = []
        self.default: Answer = "[]"

    async def complete(self, messages: Messages, *, purpose: str, caller: ModelCaller,
                       temperature: float = 0.0, max_tokens: int | None = None,
                       json_mode: bool = False) -> ChatResult:
        self.calls.append((purpose, messages))
        self.callers.append(caller)
        answer = self.answers.pop(0) if self.answers else self.default
        got = answer(purpose, messages) if callable(answer) else answer
        if isinstance(got, Exception):
            raise got
        text = got if isinstance(got, str) else await got
        return ChatResult(text=text, prompt_tokens=1, completion_tokens=1)

    def purposes(self) -> list[str]:
        return [p for p, _ in self.calls]
