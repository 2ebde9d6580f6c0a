"""Expiries that failed after the new memory was written, and their sweeper.

The new memory is always written first. When expiring the memories it
supersedes fails, the run does not fail: the expiry is handed to the
``pending_expiry`` table (in the same transaction that marks the candidate as
handled) and :class:`ExpirySweeper`, run periodically, tries again with
exponential backoff until it succeeds. Nothing is ever lost: at worst the old
and the new memory are both valid for a while.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.engine import insert_ignoring_duplicates
from streams.adapters.db.runs import CandidateRow, Retired, Run, RunStore
from streams.adapters.db.schema.consolidation import pending_expiry
from streams.backoff import Backoff
from streams.clock import naive_utc
from streams.memory.provider import ProviderError, Scope
from streams.memory.registry import ProviderRegistry
from streams.metrics import MEMORIES_EXPIRED
from streams.redaction import error_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PendingExpiry:
    closed_id: str
    seq: int
    scope: Scope
    provider: str
    cube: str
    memory_ids: list[str]
    superseded_by: str
    attempts: int


class ExpiryStore:
    def __init__(self, engine: AsyncEngine, runs: RunStore) -> None:
        self.engine = engine
        self.runs = runs
        self._insert = insert_ignoring_duplicates(engine, pending_expiry, ["closed_id", "seq"])

    async def hand_over(self, run: Run, row: CandidateRow, error: str, now: datetime,
                        first_delay_s: float) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(self._insert, {
                "closed_id": run.closed_id, "seq": row.seq, "tenant_id": run.tenant_id,
                "user_id": row.owner(run), "agent_id": run.agent_id, "provider": run.provider,
                "cube": row.cube, "memory_ids": json.dumps(list(row.expire_ids)),
                "superseded_by": row.memory_id or "", "attempts": 1,
                "next_attempt_at": naive_utc(now + timedelta(seconds=first_delay_s)),
                "last_error": error[:2000], "created_at": naive_utc(now)})
            await self.runs.mark_expired(run.closed_id, row.seq, now, conn)

    async def due(self, now: datetime, limit: int = 100) -> list[PendingExpiry]:
        p = pending_expiry.c
        q = (select(pending_expiry).where(p.next_attempt_at <= naive_utc(now))
             .order_by(p.next_attempt_at).limit(limit))
        async with self.engine.connect() as conn:
            rows = (await conn.execute(q)).all()
        return [PendingExpiry(r.closed_id, int(r.seq),
                              Scope(r.tenant_id, r.user_id, r.agent_id), r.provider,
                              r.cube, list(json.loads(r.memory_ids)), r.superseded_by,
                              int(r.attempts)) for r in rows]

    async def done(self, item: PendingExpiry, now: datetime) -> None:
        p = pending_expiry.c
        async with self.engine.begin() as conn:
            await conn.execute(delete(pending_expiry).where(
                p.closed_id == item.closed_id, p.seq == item.seq))
            await self.runs.retire_origins(conn, Retired(
                item.scope.tenant_id, item.provider, tuple(item.memory_ids)), now)

    async def failed(self, item: PendingExpiry, error: str, next_at: datetime) -> None:
        p = pending_expiry.c
        async with self.engine.begin() as conn:
            await conn.execute(update(pending_expiry).where(
                p.closed_id == item.closed_id, p.seq == item.seq).values(
                attempts=item.attempts + 1, next_attempt_at=naive_utc(next_at),
                last_error=error[:2000]))

    async def count(self) -> int:
        async with self.engine.connect() as conn:
            return int((await conn.execute(select(func.count()).select_from(pending_expiry)))
                       .scalar_one())


class ExpirySweeper:
    def __init__(self, store: ExpiryStore, registry: ProviderRegistry, *, initial_s: float,
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
