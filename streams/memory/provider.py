"""The long-term memory provider contract and its error tree.

Every provider (built-in MySQL, MemOS, Mem0) implements :class:`MemoryProvider`.
Errors are mapped to a small tree so callers decide by class, not by library:

    ProviderError
    ├── RetryableProviderError      timeouts, connection errors, HTTP 429 / 5xx
    └── PermanentProviderError      bad request, auth, unexpected answers
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from streams.memory.model import MemoryCandidate, StoredMemory


class ProviderError(Exception):
    """A provider call failed."""

    def __init__(self, message: str, *, provider: str = "", operation: str = "") -> None:
        super().__init__(message)
        self.provider = provider
        self.operation = operation


class RetryableProviderError(ProviderError):
    """Worth trying again later: timeouts, connection failures, 429 and 5xx."""


class PermanentProviderError(ProviderError):
    """Trying again will not help: the request or the answer is wrong."""


@dataclass(frozen=True)
class Scope:
    """Who the memories belong to; every provider call carries it."""

    tenant_id: str
    user_id: str
    agent_id: str


@dataclass(frozen=True)
class SearchRequest:
    """One search. ``kinds``: only memories of these kinds (``fact``, ``episode``),
    all when None. ``subjects``: subject terms (:attr:`MemoryCandidate.subjects`)
    to match besides the query's words, where the provider indexes them.
    ``order="strength"``: the strongest memories whatever the query says
    (:mod:`streams.memory.rules.strength`), where the provider can list them;
    the others search with the query."""

    query: str
    cubes: Sequence[str]
    top_k: int = 10
    relativity: float = 0.45
    keyword_only: bool = False
    include_preference: bool = True
    pref_top_k: int = 6
    dedup: bool = True
    kinds: Sequence[Literal["fact", "episode"]] | None = None
    subjects: Sequence[str] = ()
    order: Literal["relevance", "strength"] = "relevance"


@dataclass(frozen=True)
class WriteResult:
    """Ids of the written memories, in the order of the candidates."""

    ids: list[str] = field(default_factory=list)


class MemoryProvider(Protocol):
    name: str

    async def add(
        self, scope: Scope, cube: str, memories: Sequence[MemoryCandidate]
    ) -> WriteResult:
        """Store memories in ``cube``; idempotent for the same source events where the provider
        allows.
        """
        ...

    async def search(self, scope: Scope, request: SearchRequest) -> list[StoredMemory]:
        """Valid memories of ``request.cubes`` for this scope, best first; each cube is
        ranked on its own (its best hit scores 1.0, ``relativity`` cuts relative to it)."""
        ...

    async def expire(
        self, scope: Scope, cube: str, memory_ids: Sequence[str], superseded_by: str | None
    ) -> None:
        """Retire memories: the built-in provider marks them invalid; external ones delete."""
        ...

    async def forget(self, scope: Scope, cube: str, memory_ids: Sequence[str]) -> int:
        """Erase memories for good (no history kept where the provider allows it); ids
        already gone are no error. How many were erased, as far as the provider says."""
        ...

    async def forget_cube(self, scope: Scope, cube: str) -> int:
        """Erase every memory the provider holds in ``cube`` for this scope, copies
        memstream holds no id of included; raise a retryable error when the provider
        still returns any afterwards. How many were erased."""
        ...
