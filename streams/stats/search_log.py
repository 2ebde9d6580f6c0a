"""The record of long-term memory searches behind ``/stats/search-trends``.

The query path records every search it makes of a long-term memory provider:
one :class:`SearchRecord` per search, written to ``memory_search_log``.

* :meth:`SearchLog.record` writes one record (one INSERT, awaited);
* :meth:`SearchLog.record_many` writes a batch in one INSERT;
* :class:`SearchLogWriter` takes records without waiting (``add`` never blocks
  and never raises) and writes them in batches from a background task — the
  form for a latency-sensitive caller.

Rows are purged after a retention period (:meth:`SearchLog.purge`, run by the
worker). Times are naive UTC, like every other table.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.schema.stats import memory_search_log
from streams.clock import naive_utc, naive_utc_now

log = logging.getLogger(__name__)

TENANT_MAX = 64
ID_MAX = 255
WORD_MAX = 16


@dataclass(frozen=True)
class SearchRecord:
    """One search of a long-term memory provider, as the query path saw it.

    ``latency_ms``: the provider search, wall time; ``results``: memories it
    returned (after the score filter); ``provider``: ``mysql``, ``memos`` or
    ``mem0``; ``outcome``: ``ok`` when the provider answered, otherwise a short
    word for the failure (``error``, ``timeout``, ...); ``created_at``: when the
    search started (naive UTC or aware; default: now).
    """

    tenant_id: str
    user_id: str
    agent_id: str
    latency_ms: float
    results: int
    provider: str
    keyword_only: bool = False
    outcome: str = "ok"
    created_at: datetime | None = field(default=None)

    def row(self) -> dict[str, Any]:
        if not self.tenant_id or len(self.tenant_id) > TENANT_MAX:
            raise ValueError(f"tenant_id must have 1 to {TENANT_MAX} characters")
        ts = naive_utc(self.created_at or naive_utc_now())
        return {
            "tenant_id": self.tenant_id,
            "user_id": self.user_id[:ID_MAX],
            "agent_id": self.agent_id[:ID_MAX],
            "created_at": ts,
            "latency_ms": max(0.0, float(self.latency_ms)),
            "results": max(0, int(self.results)),
            "provider": self.provider[:WORD_MAX],
            "keyword_only": bool(self.keyword_only),
            "outcome": (self.outcome or "ok")[:WORD_MAX],
        }


class SearchLog:
    """``memory_search_log`` in MySQL or SQLite."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def record(self, *, tenant_id: str, user_id: str, agent_id: str, latency_ms: float,
                     results: int, provider: str, keyword_only: bool = False,
                     outcome: str = "ok", created_at: datetime | None = None) -> None:
        """Write one search (``ValueError`` for a tenant id that cannot be stored)."""
        await self.record_many([SearchRecord(
            tenant_id=tenant_id, user_id=user_id, agent_id=agent_id, latency_ms=latency_ms,
            results=results, provider=provider, keyword_only=keyword_only, outcome=outcome,
            created_at=created_at)])

    async def record_many(self, records: Sequence[SearchRecord]) -> int:
        """Write ``records`` in one INSERT; returns how many were written."""
        rows = [r.row() for r in records]
        if not rows:
            return 0
        async with self.engine.begin() as conn:
            await conn.execute(insert(memory_search_log), rows)
        return len(rows)

    async def purge(self, before: datetime, batch_size: int = 5000) -> int:
        """Delete the records older than ``before`` (naive UTC), a batch at a time."""
        t = memory_search_log
        deleted = 0
        while True:
            async with self.engine.begin() as conn:
                ids = (await conn.execute(
                    select(t.c.id).where(t.c.created_at < before).order_by(t.c.id)
                    .limit(batch_size))).scalars().all()
                if ids:
                    await conn.execute(delete(t).where(t.c.id.in_(ids)))
            deleted += len(ids)
            if len(ids) < batch_size:
                return deleted


class SearchLogWriter:
    """Buffers search records and writes them in batches in the background.

    ``add`` returns at once; a batch is written when ``max_batch`` records wait
    or ``flush_interval_s`` passed. A failed write is retried with the next
    batch; when more than ``max_pending`` records wait (the database is down),
    the oldest are dropped and the loss is logged. ``stop`` writes what is left.
    """

    def __init__(self, log_store: SearchLog, *, max_batch: int = 500,
                 flush_interval_s: float = 1.0, max_pending: int = 10_000) -> None:
        self.store = log_store
        self.max_batch = max_batch
        self.flush_interval_s = flush_interval_s
        self.max_pending = max_pending
        self.dropped = 0
        self._pending: deque[SearchRecord] = deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def add(self, record: SearchRecord) -> bool:
        """Queue ``record``; False when it is invalid and was not queued."""
        try:
            record.row()
        except ValueError as exc:
            log.warning("search record not logged: %s", exc)
            return False
        self._pending.append(record)
        while len(self._pending) > self.max_pending:
            self._pending.popleft()
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("search log backlog full: %d records dropped so far", self.dropped)
        if len(self._pending) >= self.max_batch:
            self._wake.set()
        return True

    def record_search(self, *, tenant_id: str, user_id: str, agent_id: str,
                      provider: str | None, keyword_only: bool, latency_ms: float, results: int,
                      outcome: str) -> None:
        """``add`` in the keyword form the query engine calls (``SearchRecorder``);
        an unknown provider is recorded as ``none``."""
        self.add(SearchRecord(tenant_id=tenant_id, user_id=user_id, agent_id=agent_id,
                              latency_ms=latency_ms, results=results, provider=provider or "none",
                              keyword_only=keyword_only, outcome=outcome))

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def flush(self) -> int:
        """Write everything queued now; returns the records written."""
        written = 0
        while self._pending:
            batch = [self._pending.popleft()
                     for _ in range(min(self.max_batch, len(self._pending)))]
            try:
                await self.store.record_many(batch)
            except BaseException:
                # back in front, in order (add() may have appended meanwhile)
                self._pending.extendleft(reversed(batch))
                raise
            written += len(batch)
        return written

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="search-log-writer")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        try:
            await self.flush()
        except Exception as exc:
            log.warning("search log: %d records not written at stop: %s: %s",
                        len(self._pending), type(exc).__name__, exc)

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.flush_interval_s)
            self._wake.clear()
            try:
                await self.flush()
            except Exception as exc:  # kept queued; the next round tries again
                log.warning("search log write failed (%d waiting): %s: %s",
                            len(self._pending), type(exc).__name__, exc)
