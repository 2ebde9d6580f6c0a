"""The purge of runs (``consolidation.ledger_retention_days``) on SQLite: runs done
before the cutoff go with their candidates, and so do runs left ``judged`` that
nothing resumes any more — untouched since the cutoff, no candidate written since,
no expiry pending; a judged run touched since, or with an expiry pending, and a
claimed run stay. The purge goes in chunks, each its own transaction."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db import runs as runs_module
from streams.adapters.db.runs import RunStore, run_values
from streams.adapters.db.schema.consolidation import (
    consolidation_candidate,
    consolidation_run,
    pending_expiry,
)
from streams.consolidation.model import PlannedCandidate, Run
from streams.memory.model import MemoryCandidate

NOW = datetime(2026, 12, 10, 12, 0)  # naive UTC, as the store keeps it
OLD = NOW - timedelta(days=30)
CUTOFF = NOW - timedelta(days=7)


async def judged(store: RunStore, closed_id: str, at: datetime) -> None:
    run = Run(closed_id, "t1", "c1", "u1", "a1", "mysql", True)
    async with store.engine.begin() as conn:
        await conn.execute(consolidation_run.insert().values(run_values(run, at)))
    assert await store.save_judgement(closed_id, "rules", [
        PlannedCandidate("user", MemoryCandidate(f"fact {n} of {closed_id}"))
        for n in range(3)], at)


async def left(store: RunStore) -> dict[str, int]:
    async with store.engine.connect() as conn:
        runs = (await conn.execute(select(consolidation_run.c.closed_id))).scalars().all()
        out = {}
        for closed_id in runs:
            out[closed_id] = (await conn.execute(
                select(func.count()).select_from(consolidation_candidate).where(
                    consolidation_candidate.c.closed_id == closed_id))).scalar_one()
    return out


@pytest.mark.parametrize("chunk", [500, 2])
async def test_runs_left_judged_and_stale_are_purged_with_their_candidates(
        engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(runs_module, "PURGE_CHUNK", chunk, raising=False)
    store = RunStore(engine)
    for n in range(3):
        await judged(store, f"t1/c{n}#1", OLD)  # stuck for good (provider_rejected)
    await judged(store, "t1/fresh#1", NOW - timedelta(days=1))  # a retry may still come
    await judged(store, "t1/erred#1", OLD)
    await store.record_error("t1/erred#1", "provider timed out", NOW - timedelta(hours=1))
    await judged(store, "t1/writing#1", OLD)  # resumed since: a write went out
    await store.mark_write_started("t1/writing#1", [0], NOW - timedelta(minutes=5))
    await judged(store, "t1/expiring#1", OLD)  # the sweeper still works on it
    async with engine.begin() as conn:
        await conn.execute(pending_expiry.insert().values(
            closed_id="t1/expiring#1", seq=0, tenant_id="t1", user_id="u1", agent_id="a1",
            provider="mysql", cube="user", memory_ids="[]", superseded_by="m-1", attempts=1,
            next_attempt_at=NOW, created_at=OLD))
        await conn.execute(consolidation_run.insert().values(run_values(
            Run("t1/claimed#1", "t1", "c9", "u1", "a1", "mysql", True), OLD)))
    await judged(store, "t1/done#1", OLD)
    await store.finish("t1/done#1", OLD)

    assert await store.purge(CUTOFF) == 4
    assert await left(store) == {"t1/fresh#1": 3, "t1/erred#1": 3, "t1/writing#1": 3,
                                 "t1/expiring#1": 3, "t1/claimed#1": 0}
    assert await store.purge(CUTOFF) == 0
