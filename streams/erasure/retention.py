"""RetentionRunner: what is older than the configured retention goes, on a schedule.

Off unless ``MEMSTREAM_ERASURE__MESSAGE_RETENTION_DAYS`` or
``MEMSTREAM_ERASURE__SUMMARY_RETENTION_DAYS`` is set. It takes the paths of an
erasure (:class:`~streams.erasure.ports.Deletes`): messages memstream stored
before the cutoff (never by the client's ``created_at``) whose consolidation is
over go with their ledger rows, a chunk per transaction, and the Redis
keys of every conversation a chunk touched are deleted after it (the next read
rebuilds the list from what is left); summaries not updated since the cutoff go
with their conversations' Redis keys. Long-term memories are not aged out:
they are what a memory service keeps (an erasure removes them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from streams.erasure.model import REDIS_KEYS, Counts
from streams.erasure.ports import CachedConversations, Deletes
from streams.metrics import RETENTION_DELETED

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetentionConfig:
    message_days: float | None = None
    summary_days: float | None = None

    @property
    def enabled(self) -> bool:
        return self.message_days is not None or self.summary_days is not None


class RetentionRunner:
    def __init__(self, config: RetentionConfig, tables: Deletes, cache: CachedConversations,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.tables = tables
        self.cache = cache
        self.clock = clock

    def cutoffs(self) -> tuple[datetime | None, datetime | None]:
        now = datetime.fromtimestamp(self.clock(), UTC)
        c = self.config
        return (now - timedelta(days=c.message_days) if c.message_days is not None else None,
                now - timedelta(days=c.summary_days) if c.summary_days is not None else None)

    async def run(self) -> dict[str, int]:
        """One pass; what went, per store."""
        if not self.config.enabled:
            return {}
        counts = Counts()

        async def forget(pairs: list[tuple[str, str]]) -> None:
            counts.add(REDIS_KEYS, await self.cache.forget(pairs))

        messages_before, summaries_before = self.cutoffs()
        for step in self.tables.retention_steps(messages_before, summaries_before):
            counts.add(step.name, await self.tables.delete(
                step, touched=forget if step.cached and self.cache.enabled else None))
        for store, n in counts.by_store.items():
            RETENTION_DELETED.labels(store).inc(n)
        if counts.total:
            log.info("retention: deleted %s (messages before %s, summaries before %s)",
                     counts.by_store, messages_before, summaries_before)
        return counts.by_store
