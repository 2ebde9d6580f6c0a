"""Expiries that failed after the new memory was written, and their sweeper.

The new memory is always written first. When expiring the memories it
supersedes fails, the run does not fail: the expiry is handed to the
``pending_expiry`` table (:class:`~.ports.Expiries`, in the same transaction
that marks the candidate as handled) and :class:`ExpirySweeper`, run periodically, tries again with
exponential backoff until it succeeds. Nothing is ever lost: at worst the old
and the new memory are both valid for a while.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from streams.backoff import Backoff
from streams.consolidation.ports import Expiries
from streams.memory.provider import ProviderError
from streams.memory.registry import ProviderRegistry
from streams.metrics import MEMORIES_EXPIRED
from streams.redaction import error_text

log = logging.getLogger(__name__)


class ExpirySweeper:
    def __init__(self, store: Expiries, registry: ProviderRegistry, *, initial_s: float,
                 max_s: float, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.registry = registry
        # after the n-th failed attempt: initial_s doubling up to max_s, no jitter
        self.backoff = Backoff(initial_s, max_s)
        self.clock = clock

    async def sweep(self) -> tuple[int, int]:
        """Try every due expiry once; returns (done, failed)."""
        now = datetime.fromtimestamp(self.clock(), UTC)
        done = failed = 0
        for item in await self.store.due(now):
            try:
                handle = self.registry.get(item.provider)
                await handle.provider.expire(item.scope, item.cube, item.memory_ids,
                                             item.superseded_by or None)
            except ProviderError as exc:
                failed += 1
                next_at = now + timedelta(seconds=self.backoff.delay(item.attempts + 1))
                log.warning("expiry of %s in %s still failing (attempt %d): %s",
                            item.memory_ids, item.cube, item.attempts + 1, exc)
                await self.store.failed(item, error_text(exc), next_at)
                continue
            MEMORIES_EXPIRED.labels(item.provider).inc(len(item.memory_ids))
            await self.store.done(item, now)
            done += 1
        return done, failed
