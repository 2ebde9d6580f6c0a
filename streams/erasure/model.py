"""What memstream keeps of an erasure, and what it counts: plain data.

An :class:`ErasureMark` is the durable record of one erasure as the other stages
need it: *who* (tenant, target, subject) and *up to where* (the event time
``cutoff`` and, per chat-topic partition, the end offset when it was recorded)
— never *what* was erased. A memory erasure also keeps where that memory came
from (cube, user, source event ids), so a consolidation of the same messages
does not promote it again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

Target = Literal["user", "conversation", "memory", "tenant"]
Status = Literal["recorded", "planned", "fenced", "deleting", "done", "blocked"]
STATUS_ORDER: tuple[Status, ...] = ("recorded", "planned", "fenced", "deleting", "done")
"""The progress of an erasure; ``blocked`` (an error no attempt mends stopped it)
is outside it: the same request starts it again from ``recorded``, every step
being idempotent."""

# the stores a receipt counts, beside the database tables (named by table)
REDIS_KEYS = "redis_keys"
SESSIONS_TABLE = "sessions_table"
MEMORY_TABLE = "memory"  # the built-in provider's memories, counted as its table

BUILTIN = "mysql"  # the built-in provider's route, as origin rows name it


@dataclass(frozen=True)
class MemorySource:
    """Where an erased memory came from: a candidate of the same cube, user and kind
    judged from no other events (for a passage, an episode overlapping its span) is
    not written again. ``kind`` None (a record from before kinds were kept) stands
    for every kind."""

    cube: str
    user_id: str
    event_ids: frozenset[str]
    kind: str | None = None
    span: tuple[int, int] | None = None  # a passage's offsets in its message


@dataclass(frozen=True)
class ErasureMark:
    """One erasure: who, and up to which event time and chat-topic offsets."""

    erasure_id: str
    tenant_id: str
    target: Target
    subject: str  # the user, conversation or memory id; the tenant id for ``tenant``
    cutoff: datetime  # naive UTC
    chat_offsets: dict[int, int] = field(default_factory=dict)
    source: MemorySource | None = None
    seq: int = 0  # the record's place in the erasure log (ascending)


@dataclass
class Counts:
    """What went (or would go) from each store, by store name."""

    by_store: dict[str, int] = field(default_factory=dict)

    def add(self, store: str, n: int) -> None:
        if n:
            self.by_store[store] = self.by_store.get(store, 0) + n

    def merge(self, other: dict[str, int]) -> None:
        for store, n in other.items():
            self.add(store, n)

    @property
    def total(self) -> int:
        return sum(self.by_store.values())


@dataclass(frozen=True)
class EraseConversation:
    """A conversation an erasure touches; ``whole``: every message of it goes (its
    state, summary and session rows too), else only the subject's messages."""

    conversation_id: str
    whole: bool


@dataclass(frozen=True)
class Selection:
    """What one erasure deletes, in the terms the stores need: the tenant, the target
    and its subject, and for a user or conversation erasure the conversations it
    touches (``touched``) and those that go whole (``whole``); ``cutoff`` and ``seq``:
    the erasure's, the messages it deletes dated after ``cutoff`` are remembered
    (None: nothing remembered)."""

    tenant_id: str
    target: Target
    subject: str
    whole: tuple[str, ...] = ()
    touched: tuple[str, ...] = ()
    cutoff: datetime | None = None  # naive UTC
    seq: int = 0


@dataclass(frozen=True)
class ErasureRecord:
    """An erasure as recorded: the mark the stages use, and its progress."""

    mark: ErasureMark
    status: Status
    reference: str | None
    requested_at: datetime
    finished_at: datetime | None
    error: str | None = None
    """Why it is ``blocked``: the error's class (and the database's error number)."""


@dataclass(frozen=True)
class OriginRow:
    """Where consolidation wrote one memory: its provider's id, cube and scope."""

    provider: str
    memory_id: str
    cube: str
    user_id: str
    agent_id: str


@dataclass(frozen=True)
class LocatedMemory:
    """One memory an erasure names: its provider, cube, owner, source events, kind
    (None when unknown) and, for a passage, its span."""

    provider: str
    memory_id: str
    cube: str
    user_id: str
    agent_id: str
    source_event_ids: tuple[str, ...]
    kind: str | None = None
    span: tuple[int, int] | None = None


@dataclass(frozen=True)
class BuiltinRows:
    """Which of a tenant's memories in the built-in provider go: those with the ids
    ``ids``; else those of ``user_id`` (in ``cube`` when named); else every one."""

    user_id: str | None = None
    cube: str | None = None
    ids: tuple[int, ...] | None = None
