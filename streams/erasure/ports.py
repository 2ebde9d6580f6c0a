"""What the erasure stage needs from outside, named for the need. Every method
that fails for an outage raises :class:`~streams.stores.StoreUnavailable` (the
database) or :class:`~streams.stores.CacheUnavailable` (Redis): the erasure waits
those out, every step being idempotent. ``streams/worker/wiring.py`` builds the
adapters; the cube locks are :class:`streams.memory.cube_locks.CubeLocks`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from streams.erasure.model import (
    BuiltinRows,
    EraseConversation,
    ErasureMark,
    ErasureRecord,
    LocatedMemory,
    MemorySource,
    OriginRow,
    Selection,
    Status,
    Target,
)

RecordCounts = Callable[[Any, dict[str, int]], Awaitable[None]]
"""Adds counts to an erasure's record inside the transaction that deleted them; the
first argument is that transaction, the store's own (opaque here)."""

ChatOffsets = Callable[[], Awaitable[dict[int, int]]]
"""The chat topic's end offsets now, per partition; raises StoreUnavailable."""


class ErasureLog(Protocol):
    """Who was erased up to where, and how far each erasure got
    (:class:`~streams.adapters.db.erasure_log.TableErasureLog`). The methods the
    erasure's steps call raise StoreUnavailable; :meth:`marks_since`,
    :meth:`last_done` and :meth:`pass_fence` (read and written by the other stages)
    raise the store's own error, which those stages classify."""

    async def record(self, *, erasure_id: str, tenant_id: str, target: Target, subject: str,
                     cutoff: datetime, chat_offsets: Mapping[int, int], now: datetime,
                     source: MemorySource | None = None,
                     reference: str | None = None) -> ErasureRecord:
        """Record the erasure, or find the one the tenant recorded under ``erasure_id``."""
        ...

    async def get(self, tenant_id: str, erasure_id: str) -> ErasureRecord | None: ...

    async def set_status(self, seq: int, status: Status, now: datetime,
                         error: str | None = None) -> None:
        """Move the erasure on (clearing any error), or mark it ``blocked`` by ``error``."""
        ...

    async def plan(self, seq: int, conversations: Sequence[EraseConversation],
                   now: datetime | None = None) -> None:
        """Add the conversations the erasure touches; with ``now``, mark it planned (a
        blocked erasure's error cleared)."""
        ...

    async def conversations(self, seq: int) -> list[EraseConversation]: ...

    async def fences(self, seq: int, round: int = 1) -> set[int]:
        """The ingest partitions that passed the erasure's fence (of ``round``)."""
        ...

    async def counts(self, seq: int) -> dict[str, int]:
        """What the erasure deleted so far, per store."""
        ...

    async def add_counts(self, seq: int, counts: Mapping[str, int]) -> None:
        """Add counts of copies deleted outside the database, on their own."""
        ...

    async def add_count(self, conn: Any, seq: int, counts: Mapping[str, int]) -> None:
        """Add counts inside ``conn``, the transaction that deleted them."""
        ...

    async def marks_since(self, seq: int) -> list[ErasureMark]:
        """Every erasure recorded after ``seq``, oldest first."""
        ...

    async def last_done(self) -> int:
        """The highest ``seq`` of a finished erasure (0: none)."""
        ...

    async def unfinished(self) -> list[ErasureRecord]:
        """Every erasure not finished, oldest first."""
        ...

    async def pass_fence(self, seq: int, partition: int, tombstones: int,
                         now: datetime, round: int = 1) -> None:
        """An ingest partition passed the erasure's fence of ``round`` (1: took the
        erasure in; 2: deleted the states of the conversations it takes whole),
        writing ``tombstones``."""
        ...


class DeleteStep(Protocol):
    """The rows of one table an erasure or a retention pass deletes, as the store
    describes them; made by :class:`Deletes`, handed back to it."""

    @property
    def name(self) -> str:
        """The table: the receipt counts its rows under this name."""
        ...

    @property
    def cached(self) -> bool:
        """The Redis keys of the conversations whose rows went must go too."""
        ...


class Deletes(Protocol):
    """The stage's rows in the database, deleted table by table in chunks, each chunk
    with its count (:class:`~streams.adapters.db.erasure_deletes.TableDeletes`)."""

    def erasure_steps(self, sel: Selection) -> Sequence[DeleteStep]:
        """The tables an erasure deletes from, in order (memories aside)."""
        ...

    def retention_steps(self, messages_before: datetime | None,
                        summaries_before: datetime | None) -> Sequence[DeleteStep]:
        """What a retention pass deletes: messages and summaries past their cutoffs."""
        ...

    async def count(self, step: DeleteStep) -> int: ...

    async def delete(self, step: DeleteStep, record: RecordCounts | None = None,
                     touched: Callable[[list[tuple[str, str]]], Awaitable[None]] | None = None,
                     stop: Callable[[], bool] | None = None) -> int:
        """Delete the step's rows, a chunk per transaction, ``record`` adding each
        chunk's count in its transaction; ``touched`` hears the (tenant, conversation)
        pairs of each chunk; ``stop`` is asked after each chunk (True: the rest stays
        for the next call)."""
        ...

    async def candidates_from(self, tenant_id: str, conversations: Sequence[str],
                              events: set[str], record: RecordCounts) -> int:
        """Delete the candidates judged in ``conversations`` from any of ``events``."""
        ...

    async def agents_of(self, tenant_id: str, *, user_id: str | None = None,
                        conversation_id: str | None = None) -> list[str]:
        """The agents a user spoke to, or that spoke in a conversation."""
        ...

    async def sub_agent_messages(self, tenant_id: str,
                                 conversation_id: str) -> tuple[list[str], set[str]]:
        """A sub-agent conversation's messages stored in their parents: the parents,
        and the messages' event ids."""
        ...

    async def speakers(self, tenant_id: str, conversation_id: str) -> list[str]: ...

    async def user_conversations(self, tenant_id: str,
                                 user_id: str) -> list[EraseConversation]:
        """The conversations ``user_id`` has messages in; ``whole`` when nobody else does."""
        ...


class Origins(Protocol):
    """Where consolidation wrote each memory
    (:class:`~streams.adapters.db.erasure_origins.OriginRows`)."""

    async def of(self, sel: Selection, provider: str | None = None) -> list[OriginRow]: ...

    async def drop(self, tenant_id: str, provider: str, memory_ids: Sequence[str],
                   record: RecordCounts | None = None) -> int:
        """Delete the origin rows of ``memory_ids``, counted in the same transaction."""
        ...

    async def judged_from(self, tenant_id: str, conversations: Sequence[str],
                          events: set[str]) -> list[OriginRow]:
        """The memories consolidated in ``conversations`` from any of ``events``."""
        ...

    async def locate(self, tenant_id: str, memory_id: str,
                     provider: str | None) -> list[LocatedMemory]:
        """Where the memory ``memory_id`` is (of ``provider``, or any)."""
        ...


class BuiltinMemories(Protocol):
    """The built-in provider's memories, selected by :class:`BuiltinRows`
    (:class:`~streams.adapters.db.builtin_erasure.BuiltinCopies`)."""

    async def erase(self, tenant_id: str, rows: BuiltinRows, record: RecordCounts,
                    stop: Callable[[], bool] | None = None) -> None:
        """Delete them (rows, postings, vectors, statistics), each chunk counted in its
        transaction; ``stop`` is asked after each chunk (True: the rest stays for the
        next call). Raises the provider's errors (a database failure is a
        :class:`~streams.memory.provider.RetryableProviderError`)."""
        ...

    async def count(self, tenant_id: str, rows: BuiltinRows) -> dict[str, int]:
        """What :meth:`erase` would delete, per table."""
        ...


class CachedConversations(Protocol):
    """The hot copies of conversations (Redis), deleted with them
    (:class:`~streams.adapters.redis.conversation_cache.ConversationCache`). Never
    skipped after a recent failure: a failure raises CacheUnavailable."""

    @property
    def enabled(self) -> bool: ...

    async def forget(self, conversations: Iterable[tuple[str, str]]) -> int:
        """Delete every key of the (tenant, conversation) pairs; how many there were."""
        ...

    async def forget_tenant(self, tenant_id: str, *, dry_run: bool = False) -> int:
        """Delete (or count) every conversation key of the tenant."""
        ...

    async def count(self, conversations: Iterable[tuple[str, str]]) -> int:
        """How many keys :meth:`forget` would delete."""
        ...
