"""Long-term memory records shared by the judge, dedup, conflict rules,
providers and retrieval.

Layers and types are separate axes: the *scope* says which layer a memory is
promoted to (``user`` -> the ``user_profile`` cube, ``agent`` -> the
``agent_{agentId}`` cube); the *type* says what kind of memory it is (text,
preference, skill, tool), as in MemOS' text_mem / pref_mem / skill_mem /
tool_mem.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter
from typing import Literal, get_args

from streams.wire.records import AGENT_CUBE_PREFIX

MemoryType = Literal["text", "preference", "skill", "tool"]
ScopeKind = Literal["user", "agent"]  # the layer; who owns a memory is provider.Scope
MEMORY_TYPES: tuple[str, ...] = get_args(MemoryType)
SCOPE_KINDS: tuple[str, ...] = get_args(ScopeKind)

USER_CUBE = "user_profile"
MAX_MEMORY_CHARS = 200


def agent_cube(agent_id: str) -> str:
    return f"{AGENT_CUBE_PREFIX}{agent_id}"


def cube_for(scope: ScopeKind, agent_id: str) -> str:
    return USER_CUBE if scope == "user" else agent_cube(agent_id)


def readable_cubes(agent_id: str) -> list[str]:
    return [USER_CUBE, agent_cube(agent_id)]


@dataclass(frozen=True)
class CubeKey:
    """Which memories one cube is: ``user_profile`` is the user's (across agents),
    ``agent_{id}`` the agent's, shared by its users (``owner`` empty)."""

    tenant_id: str
    cube: str
    owner: str


def cube_key(tenant_id: str, cube: str, user_id: str) -> CubeKey:
    """The cube ``cube`` as the user ``user_id`` of ``tenant_id`` writes to it."""
    return CubeKey(tenant_id, cube, user_id if cube == USER_CUBE else "")


@dataclass(frozen=True)
class HeldScopes:
    """Which memories a worker's caches let go of (an erasure finished): those of
    ``tenant_id``; with ``cube``, only the scopes of that cube and ``owner``; with
    ``user_id``, only the user's profile and the agent cubes (which hold every user's
    memories), and of the memory rows only the user's; with ``memory_ids``, of the
    memory rows only those."""

    tenant_id: str
    cube: str | None = None
    owner: str | None = None
    user_id: str | None = None
    memory_ids: frozenset[str] = frozenset()

    def covers_scope(self, tenant_id: str, cube: str, owner: str) -> bool:
        """Whether the scope ``cube`` of ``owner`` in ``tenant_id`` is among them."""
        if tenant_id != self.tenant_id:
            return False
        if self.cube is not None and (cube, owner) != (self.cube, self.owner):
            return False
        return self.user_id is None or owner in ("", self.user_id)

    def covers_row(self, tenant_id: str, cube: str, user_id: str, memory_id: str) -> bool:
        """Whether the memory ``memory_id`` of ``user_id`` in ``cube`` is among them."""
        if tenant_id != self.tenant_id:
            return False
        if self.memory_ids:
            return memory_id in self.memory_ids
        if self.cube is not None and (cube != self.cube or (
                cube == USER_CUBE and user_id != self.owner)):
            return False
        return self.user_id is None or user_id == self.user_id


@dataclass(frozen=True)
class SourceMessage:
    """A session message as the judge sees it."""

    event_id: str
    role: str
    content: str
    created_at: datetime
    name: str | None = None
    new: bool = True


@dataclass(frozen=True)
class MemoryCandidate:
    """A memory proposed by a judge, before dedup and conflict checks."""

    content: str
    type: MemoryType = "text"
    scope: ScopeKind = "user"
    importance: float = 0.5
    source_event_ids: tuple[str, ...] = ()
    event_time: datetime | None = None
    kind: Literal["fact", "episode"] = "fact"
    # what the memory is about, as index terms (``§residence``): a provider that can
    # index them finds the memory by its subject, whatever words it uses
    subjects: tuple[str, ...] = ()
    # an episode: the role of the message it was made from ("user", "assistant"), and
    # the part of that message a passage is (character offsets in the message's
    # content, end exclusive; None: the whole message, or not a passage)
    role: str | None = None
    span: tuple[int, int] | None = None
    # the kinds of sensitive content whose spans were replaced by placeholders
    # (``("card", "email")``, sorted): provenance, never the text itself
    masked: tuple[str, ...] = ()


@dataclass(frozen=True)
class StoredMemory:
    """A memory as a provider returns it."""

    id: str
    content: str
    cube: str
    type: MemoryType = "text"
    scope: ScopeKind = "user"
    score: float = 0.0
    importance: float = 0.5
    event_time: datetime | None = None
    source_event_ids: tuple[str, ...] = ()
    kind: Literal["fact", "episode"] = "fact"
    metadata: dict[str, object] = field(default_factory=dict)


by_score: Callable[[StoredMemory], float] = attrgetter("score")
"""The sort key of memories by score (``sorted(..., key=by_score, reverse=True)``: best
first, ties in their order), read in C: a search's memories are sorted several times."""

_DECIMAL = re.compile(r"[1-9][0-9]{0,18}")


def decimal_id(value: object) -> int | None:
    """A built-in memory's id as written by memstream (ASCII digits, no sign, no leading
    zero, within a BIGINT), else None: ``"01"``, ``"²"`` or ``"١"`` name no memory."""
    text = value if isinstance(value, str) else str(value) if isinstance(value, int) else ""
    return int(text) if _DECIMAL.fullmatch(text) else None
