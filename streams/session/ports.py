"""What the session stage needs from the stores around it.

* :class:`SessionTable`: the sessions table (the Faust ``sessions`` table,
  :class:`streams.worker.faust_glue.FaustTable`);
* :class:`MessageLog`: the durable conversation history, read
  (:class:`streams.adapters.db.messages.MessageStore`);
* :class:`HotCopy`: each conversation's newest messages in Redis
  (:class:`streams.adapters.redis.conversation_cache.ConversationCache`);
* :class:`StaleMarks`: the durable stale-history marks
  (:class:`streams.adapters.db.stale_marks.StaleMarkStore`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

from streams.session.model import ConversationKey, ConversationSummary, MessageDoc, StaleMark
from streams.wire.envelope import SourceRecord


class SessionTable(Protocol):
    """Values are :meth:`~streams.session.model.SessionState.to_table` documents keyed
    by :func:`~streams.session.model.table_key`."""

    def get(self, key: str) -> dict[str, Any] | None: ...

    def set(self, key: str, value: dict[str, Any]) -> None: ...

    def stored_keys(self) -> Iterable[str]:
        """The keys this worker holds (of the partitions assigned to it)."""
        ...

    def delete(self, key: str) -> None:
        """Remove ``key``; a table with a changelog writes a tombstone."""
        ...

    def context(self, record: SourceRecord) -> AbstractContextManager[None]:
        """Writes inside this context belong to ``record``'s partition."""
        ...


class MessageLog(Protocol):
    """The stored conversation history (the truth the cache copies). Raises whatever
    makes a read fail: the Session read has no fallback for the database."""

    async def recent(self, tenant_id: str, conversation_id: str, limit: int) -> list[MessageDoc]:
        """The newest ``limit`` messages, oldest first."""
        ...

    async def summary(self, tenant_id: str, conversation_id: str) -> ConversationSummary | None:
        """The conversation's stored summary, if it has one."""
        ...


class HotCopy(Protocol):
    """Each conversation's newest messages (at most ``history_max``) and its summary,
    in a cache that may fail: every method but the properties raises
    :class:`~streams.stores.CacheUnavailable` when it fails or is being skipped."""

    @property
    def enabled(self) -> bool:
        """False: there is no cache; nothing is written to or read from it."""
        ...

    @property
    def history_max(self) -> int: ...

    async def append(
        self,
        new_messages: Mapping[ConversationKey, Sequence[MessageDoc]],
        *,
        fresh: Iterable[ConversationKey] = (),
        invalidate: Iterable[ConversationKey] = (),
    ) -> None:
        """Append each conversation's new messages (oldest first) to its list, if it
        has one; a ``fresh`` conversation (no earlier history) gets one. The lists of
        ``invalidate`` are deleted instead. An event already in a list is not added."""
        ...

    async def read(self, tenant_id: str, conversation_id: str, n: int) -> list[MessageDoc] | None:
        """The newest ``n`` messages oldest first; None on a miss."""
        ...

    async def version(self, tenant_id: str, conversation_id: str) -> bytes | None:
        """The list's write version, for :meth:`backfill`."""
        ...

    async def backfill(self, tenant_id: str, conversation_id: str, docs: Sequence[MessageDoc],
                       seen_version: bytes | None) -> bool:
        """Rebuild the list from ``docs`` unless it was written since ``seen_version``;
        whether it was rebuilt. A failed write is False; raises
        :class:`~streams.stores.CacheUnavailable` when the cache is off or backing off."""
        ...

    async def get_summary(self, tenant_id: str, conversation_id: str) -> dict[str, Any] | None:
        ...

    async def set_summary(self, tenant_id: str, conversation_id: str,
                          summary: dict[str, Any]) -> None:
        ...


class StaleMarks(Protocol):
    """The durable stale-history marks, one per conversation."""

    async def mark(self, keys: Iterable[ConversationKey], now: datetime) -> int:
        """Mark ``keys`` stale at once (a mark already there gets the new id); returns
        the id, never :data:`~streams.session.rules.stale.UNKNOWN_MARK`. Raises on any
        failure, nothing marked then (the caller retries)."""
        ...

    async def get(self, tenant_id: str, conversation_id: str) -> StaleMark | None:
        """The conversation's mark. Raises :class:`~streams.stores.StoreUnavailable`
        or :class:`~streams.stores.StoreRefused` when the store fails."""
        ...

    async def page(self, after: ConversationKey | None, limit: int) -> list[StaleMark]:
        """Up to ``limit`` marks in key order, after ``after``. Raises on any failure
        (the caller retries)."""
        ...

    async def clear(self, marks: Sequence[StaleMark]) -> dict[ConversationKey, int]:
        """Delete each of ``marks`` unless marked again since (its id changed); the
        keys still marked, with their id now. Raises
        :class:`~streams.stores.StoreUnavailable` or :class:`~streams.stores.StoreRefused`
        when the store fails, nothing deleted then."""
        ...
