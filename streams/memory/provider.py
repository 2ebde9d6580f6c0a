"""The long-term memory provider contract, the chat-model contract and their error tree.

Every provider (built-in MySQL, MemOS, Mem0) implements :class:`MemoryProvider`;
a chat model (the OpenAI-compatible client) implements :class:`ChatCompleter`.
Errors are mapped to one tree so callers decide by class, not by library:

    ProviderError
    ├── RetryableProviderError      timeouts, connection errors, HTTP 429 / 5xx
    │   ├── ProviderTimeout             the call did not complete in time
    │   ├── ProviderUnavailable         connection failure, 5xx, server overloaded
    │   └── ProviderRateLimited         429 (or a body code meaning the same)
    └── PermanentProviderError      bad request, auth, unexpected answers
        ├── ProviderRequestRejected     4xx other than 429, or a body code saying so
        ├── ProviderBadAnswer           2xx that is not the documented shape
        └── EmptyModelAnswer            a chat model answered without content

The leaves but :class:`EmptyModelAnswer` carry the HTTP ``status`` and a
server-requested ``retry_after_s`` when known.
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


class _WithStatus(ProviderError):
    """Carries the HTTP status and a server-requested retry delay when known."""

    def __init__(self, message: str, *, provider: str = "", operation: str = "",
                 status: int | None = None, retry_after_s: float | None = None) -> None:
        super().__init__(message, provider=provider, operation=operation)
        self.status = status
        self.retry_after_s = retry_after_s


class ProviderTimeout(_WithStatus, RetryableProviderError):
    """The call did not complete within its timeout."""


class ProviderUnavailable(_WithStatus, RetryableProviderError):
    """Connection failure, HTTP 5xx, or a body code meaning server failure/overload."""


class ProviderRateLimited(_WithStatus, RetryableProviderError):
    """HTTP 429 (or a body code meaning the same)."""


class ProviderRequestRejected(_WithStatus, PermanentProviderError):
    """HTTP 4xx other than 429, or a body code meaning the request is wrong."""


class ProviderBadAnswer(_WithStatus, PermanentProviderError):
    """The server answered 2xx with something that is not the documented shape."""


class EmptyModelAnswer(PermanentProviderError):
    """The model answered without any content (no choices, or empty content)."""


@dataclass(frozen=True)
class ChatResult:
    """A chat model's answer: its text and the tokens it took."""

    text: str
    prompt_tokens: int
    completion_tokens: int


@dataclass
class ModelTally:
    """What the model calls made for one piece of work took (a session end's run):
    the client adds each call's tokens as it answers."""

    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class ModelCaller:
    """On whose behalf a model is called: the tenant and agent its usage and cost are
    counted for (``streams.model_usage``), and optionally the tally of the work
    the call is part of. Passed explicitly with every call, never read from
    ambient state, so concurrent runs of different tenants cannot mix up."""

    tenant_id: str
    agent_id: str
    tally: ModelTally | None = field(default=None, compare=False)


class ChatCompleter(Protocol):
    """A chat model (judge, conflict decisions, summaries)."""

    model: str

    async def complete(self, messages: list[dict[str, str]], *, purpose: str,
                       caller: ModelCaller, temperature: float = 0.0,
                       max_tokens: int | None = None, json_mode: bool = False) -> ChatResult:
        """One completion of ``messages``; ``purpose`` (judge, conflict, summary) and
        ``caller`` label the usage counts. Raises :class:`EmptyModelAnswer` when the answer has no
        content, and any other :class:`ProviderError` when the call failed after the
        client's own retries."""
        ...


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
