"""ExpiryStore: the ``pending_expiry`` table, the expiries left to the sweeper.

An expiry that failed after its new memory was written is handed over in the
same transaction that marks the candidate as handled, so it is recorded exactly
once; the sweeper (:class:`streams.consolidation.expiry.ExpirySweeper`) reads
the due ones and records each attempt. Implements the ``Expiries`` port of
:mod:`streams.consolidation.ports`.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.engine import insert_ignoring_duplicates
from streams.adapters.db.runs import RunStore
from streams.adapters.db.schema.consolidation import pending_expiry
from streams.clock import naive_utc
from streams.consolidation.model import CandidateRow, PendingExpiry, Retired, Run
from streams.memory.provider import Scope


class ExpiryStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
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
            await RunStore.mark_expired_in(conn, run.closed_id, row.seq, now)

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
            await RunStore.retire_origins(conn, Retired(
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
