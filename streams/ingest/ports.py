"""What the ingest stage needs from the stores around it.

* :class:`MessageRows` and :class:`ClosedSessions`: the durable conversation
  history (:class:`streams.adapters.db.messages.MessageStore`);
* :class:`RowBatches`: writes of a batch of rows that survive rows the store
  never takes (:class:`streams.adapters.db.isolation.IsolatedBatches`);
* :class:`WholeConversations`: what a user erasure takes whole
  (:class:`streams.adapters.db.erasure_reads.ConversationReads`);
* :class:`FencePassed`: the erasure log, told a fence was passed;
* :class:`ErasedEvents`: the events an erasure deleted that its cutoff does not
  cover (:class:`streams.adapters.db.messages.MessageStore`);
* :class:`EventQuota`: the quota of chat events per tenant
  (:class:`streams.ingest.pacing.EventPacer`).

The Redis copy and the stale-history marks are the session stage's ports
(:mod:`streams.session.ports`); events go out through
:class:`streams.wire.envelope.Publisher`. Where a method raises "on any failure",
the caller retries until it passes (the batch stays unacknowledged meanwhile) and
the error's class names the failure in the metrics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

from streams.ingest.model import EventKey, MessageRow, StoredRows
from streams.session.model import ConversationKey
from streams.wire.envelope import SourceRecord
from streams.wire.erasure import ErasureFence


class MessageRows(Protocol):
    """The stored messages, one row per ``(tenant_id, event_id)``."""

    async def store(self, rows: Sequence[MessageRow]) -> set[EventKey]:
        """Insert the rows not stored yet, in order, at once; the keys that were new.
        A row whose event an erasure deleted and remembered (:class:`ErasedEvents`)
        counts as stored: it is not stored again.
        Raises the store's own error on any failure, nothing stored then (a
        :class:`RowBatch` tells a refused row from an outage by it)."""
        ...

    async def probe(self) -> None:
        """A valid write that leaves nothing behind: raises what any write would
        raise now."""
        ...


class ClosedSessions(Protocol):
    """The last closed session of each conversation whose state left the sessions table."""

    async def last_closed_sessions(
        self, keys: Sequence[ConversationKey]
    ) -> dict[ConversationKey, int]:
        """The remembered last closed session of those of ``keys`` that have one.
        Raises on any failure."""
        ...

    async def remember_closed_sessions(self, marks: Mapping[ConversationKey, int],
                                       now: datetime) -> None:
        """Remember each conversation's last closed session, at once. Raises on any
        failure, nothing remembered then."""
        ...


class RowBatch(Protocol):
    """One batch of rows being written; resumable after a failure."""

    async def run(self) -> StoredRows:
        """Write what is still pending; the keys stored and the rows refused for good.
        Raises on a failure to be retried (then call again: what was stored stays
        stored). A row is refused only while the store takes other writes."""
        ...


class RowBatches(Protocol):
    def batch(self, rows: Sequence[MessageRow]) -> RowBatch:
        """A write of ``rows`` (nothing is written before :meth:`RowBatch.run`)."""
        ...


class WholeConversations(Protocol):
    async def whole_conversations(self, seq: int) -> list[str]:
        """The conversations user erasure ``seq`` takes whole, as the erasure recorded
        them once every partition had taken it in (a read of the erasure's own record,
        never of the messages). Raises on any failure."""
        ...

    async def shared_conversations(self, seq: int) -> list[str]:
        """The conversations user erasure ``seq`` takes the user's messages of and
        others spoke in too (group chats), as it recorded them. Raises on any
        failure."""
        ...


class FencePassed(Protocol):
    async def __call__(self, fence: ErasureFence, tombstones: int) -> None:
        """Record that this partition passed ``fence``, having deleted ``tombstones``
        session states. Raises on any failure, nothing recorded then."""
        ...


class ErasedEvents(Protocol):
    async def erased(self, keys: Sequence[EventKey]) -> set[EventKey]:
        """Those of ``keys`` an erasure deleted and remembered: dated after its cutoff,
        which does not cover them when they are sent again. Raises on any failure."""
        ...


class EventQuota(Protocol):
    def weigh(self, rec: SourceRecord, tenant: str, now: float) -> str | None:
        """None to store chat event ``rec`` of ``tenant`` at ``now``, else why it is
        over its tenant's quota (it is dead-lettered ``over_quota`` with that message).
        Called once for each read of an event, where it is first read."""
        ...
