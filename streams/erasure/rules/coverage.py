"""Which events, sessions and memories an erasure covers: pure rules.

An event of the erased subject is covered when it happened up to the erasure's
``cutoff`` (event time), or when it was read — or first read, for a record
re-keyed or re-driven from the dead-letter topic — from a chat-topic partition
below the end offset recorded with the erasure (a producer whose clock runs
ahead cannot slip an old event past it). An event published after the erasure, with a
later ``created_at``, is new and is kept — unless the erasure deleted it (it was
stored before, dated after the cutoff: the erasure remembers its event id, and
ingest refuses that id). Ingest skips covered events, so a replay of the chat
topic from offset 0 brings nothing back; consolidation skips covered session
ends.

:class:`ErasureIndex` holds every erasure a worker knows, indexed by tenant and
subject, so a check costs a few dictionary lookups whatever the number of
erasures.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from streams.erasure.model import ErasureMark, MemorySource


@dataclass(frozen=True)
class EventPlace:
    """Where an event was first read: chat-topic partition and offset (None when it
    was not read from the chat topic, e.g. re-driven from the dead-letter topic)."""

    partition: int
    offset: int


def covers(mark: ErasureMark, created_at: datetime, places: Sequence[EventPlace] = ()) -> bool:
    """Whether an event of ``mark``'s subject at ``created_at`` (naive UTC), read at
    ``places`` of the chat topic, is covered by it."""
    if created_at <= mark.cutoff:
        return True
    return any((end := mark.chat_offsets.get(p.partition)) is not None and p.offset < end
               for p in places)


class ErasureIndex:
    """The erasures one worker knows, by tenant and subject."""

    def __init__(self, marks: Iterable[ErasureMark] = ()) -> None:
        self._by_user: dict[tuple[str, str], list[ErasureMark]] = defaultdict(list)
        self._by_conversation: dict[tuple[str, str], list[ErasureMark]] = defaultdict(list)
        self._by_tenant: dict[str, list[ErasureMark]] = defaultdict(list)
        self._memories: dict[str, list[ErasureMark]] = defaultdict(list)
        self._ids: set[tuple[str, str]] = set()  # (tenant, erasure id)
        self.last_seq = 0
        for m in marks:
            self.add(m)

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, key: object) -> bool:
        """``(tenant_id, erasure_id)`` in the index."""
        return key in self._ids

    def add(self, mark: ErasureMark) -> bool:
        """Take ``mark`` in; False when it was known already."""
        self.last_seq = max(self.last_seq, mark.seq)
        key = (mark.tenant_id, mark.erasure_id)
        if key in self._ids:
            return False
        self._ids.add(key)
        if mark.target == "user":
            self._by_user[(mark.tenant_id, mark.subject)].append(mark)
        elif mark.target == "conversation":
            self._by_conversation[(mark.tenant_id, mark.subject)].append(mark)
        elif mark.target == "tenant":
            self._by_tenant[mark.tenant_id].append(mark)
        elif mark.source is not None:
            self._memories[mark.tenant_id].append(mark)
        return True

    def _marks(self, tenant_id: str, user_id: str | None,
               conversations: Iterable[str]) -> list[ErasureMark]:
        out = list(self._by_tenant.get(tenant_id, ()))
        if user_id is not None:
            out += self._by_user.get((tenant_id, user_id), ())
        for c in conversations:
            out += self._by_conversation.get((tenant_id, c), ())
        return out

    def event_covered(self, tenant_id: str, user_id: str, conversations: Iterable[str],
                      created_at: datetime, places: Sequence[EventPlace] = (), *,
                      users: bool = True) -> ErasureMark | None:
        """The erasure covering a chat event (``conversations``: the one it is stored
        in and, for sub-agent chat, its own), if any; ``users`` False: only an
        erasure of a conversation or of the tenant counts."""
        if not (self._by_tenant or self._by_user or self._by_conversation):
            return None
        for mark in self._marks(tenant_id, user_id if users else None, conversations):
            if covers(mark, created_at, places):
                return mark
        return None

    def names(self, tenant_id: str, user_id: str, conversations: Iterable[str]) -> bool:
        """Whether any erasure names the tenant, the user or one of ``conversations``
        (whatever it covers): an event of theirs may be one an erasure deleted."""
        return bool(self._marks(tenant_id, user_id, conversations))

    def session_covered(self, tenant_id: str, user_id: str, conversation_id: str,
                        last_activity: datetime) -> ErasureMark | None:
        """The erasure covering a closed session whose newest event was at
        ``last_activity`` (naive UTC), if any: its messages are gone or going."""
        for mark in self._marks(tenant_id, user_id, (conversation_id,)):
            if last_activity <= mark.cutoff:
                return mark
        return None

    def erased_memory(self, tenant_id: str, cube: str, user_id: str,
                      source_event_ids: Iterable[str], kind: str | None = None,
                      span: tuple[int, int] | None = None) -> ErasureMark | None:
        """The memory erasure whose memory a candidate would bring back: same cube, user
        and kind, judged from none but that memory's source events, and for an episode
        overlapping its span (:func:`same_part`). Another memory judged from the same
        message (the fact beside an erased episode, the episode beside an erased fact)
        is not that memory."""
        sources = frozenset(source_event_ids)
        if not sources:
            return None
        for mark in self._memories.get(tenant_id, ()):
            s = mark.source
            if (s is not None and s.cube == cube and s.user_id == user_id
                    and sources <= s.event_ids and same_part(s, kind, span)):
                return mark
        return None


def same_part(source: MemorySource, kind: str | None, span: tuple[int, int] | None) -> bool:
    """Whether a candidate of ``kind`` (an episode: of ``span`` in its message, None for
    the whole message) stands for the erased memory's part of its messages: the same
    kind (either unknown: any), and for episodes overlapping spans."""
    if source.kind is None or kind is None:
        return True
    if source.kind != kind:
        return False
    if kind != "episode" or source.span is None or span is None:
        return True
    return source.span[0] < span[1] and span[0] < source.span[1]
