"""In-memory doubles of the ingest stage's ports (:mod:`streams.ingest.ports`).

The row writes themselves go through the real
:class:`~streams.adapters.db.isolation.IsolatedBatches` the wiring builds, so a
double fails the way a database driver does: :class:`DatabaseDown` is a
connection error, which the isolation retries as an outage.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from streams.ingest.model import EventKey, MessageRow
from streams.session.model import ConversationKey


class DatabaseDown(ConnectionError):
    """What the driver raises when the database is unreachable (a transient error)."""


class InMemoryMessageStore:
    """The stored messages (:class:`~streams.ingest.ports.MessageRows`) and the last
    closed sessions (:class:`~streams.ingest.ports.ClosedSessions`).

    ``rows``: what is stored, in order; ``closed_sessions``: what is remembered;
    ``fail_next``: the next n writes raise :class:`DatabaseDown`; ``calls``: the row
    writes tried; ``probes``: the probe writes; ``erased_keys``: the events an
    erasure deleted and remembered (:class:`~streams.ingest.ports.ErasedEvents`),
    never stored again."""

    def __init__(self) -> None:
        self.rows: list[MessageRow] = []
        self.erased_keys: set[EventKey] = set()
        self.fail_next = 0
        self.calls = 0
        self.closed_sessions: dict[ConversationKey, int] = {}
        self.probes = 0

    async def store(self, rows: Sequence[MessageRow]) -> set[EventKey]:
        self.calls += 1
        if self.fail_next:
            self.fail_next -= 1
            raise DatabaseDown("database unavailable")
        have = {(r["tenant_id"], r["event_id"]) for r in self.rows} | self.erased_keys
        new = set()
        for r in rows:
            k = (r["tenant_id"], r["event_id"])
            if k not in have:
                have.add(k)
                new.add(k)
                self.rows.append(dict(r))
        return new

    async def probe(self) -> None:
        self.probes += 1

    async def erased(self, keys: Sequence[EventKey]) -> set[EventKey]:
        return set(keys) & self.erased_keys

    async def last_closed_sessions(
        self, keys: Sequence[ConversationKey]
    ) -> dict[ConversationKey, int]:
        return {k: self.closed_sessions[k] for k in keys if k in self.closed_sessions}

    async def remember_closed_sessions(self, marks: Mapping[ConversationKey, int],
                                       now: datetime) -> None:
        if not marks:
            return
        if self.fail_next:
            self.fail_next -= 1
            raise DatabaseDown("database unavailable")
        for key, seq in marks.items():  # never lowered, as the database does
            self.closed_sessions[key] = max(seq, self.closed_sessions.get(key, seq))


class StaticWholeConversations:
    """:class:`~streams.ingest.ports.WholeConversations` answering ``whole`` (and
    ``shared``) for every erasure; ``asked``: the erasures (``seq``) asked about."""

    def __init__(self, whole: Iterable[str] = (), shared: Iterable[str] = ()) -> None:
        self.whole = list(whole)
        self.shared = list(shared)
        self.asked: list[int] = []

    async def whole_conversations(self, seq: int) -> list[str]:
        self.asked.append(seq)
        return list(self.whole)

    async def shared_conversations(self, seq: int) -> list[str]:
        return list(self.shared)
