"""RunStore: how far each closing event got, and its persisted candidates.

A run (one per ``closed_id``) moves ``claimed`` -> ``judged`` -> ``done``.
Its candidates are stored once, when the run becomes ``judged`` (guarded by
that transition, so two attempts never mix their judgements); after that a
retry reuses them and never judges again. Per candidate the store then
records, each in its own small transaction:

* the conflict decision (``action``, ``expire_ids``), for a whole cube at once;
  a decision not written yet may later become a ``skip`` (decider
  ``recheck``: another run stored the same memory before this one resumed);
* the write intent (``write_started_at``) just before the provider call;
* the provider's id for it (``memory_id``) right after the call returned,
  with the memory's origin (``memory_origin``) in the same transaction;
* ``expired_at`` once the memories it supersedes were expired, or handed to
  the pending-expiry table.

A candidate whose user an erasure covers is deleted (:meth:`RunStore.drop`),
whatever step it reached: the run writes nothing more of it.

A candidate with a write intent but no id was being written when the attempt
stopped: the provider may or may not have stored it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import and_, bindparam, delete, exists, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.elements import ColumnElement

from streams.adapters.db.engine import upsert
from streams.adapters.db.schema.consolidation import (
    consolidation_candidate,
    consolidation_run,
    memory_origin,
    pending_expiry,
)
from streams.adapters.db.schema.memory import masked_column, masked_of, role_and_span, span_of
from streams.clock import aware_utc, naive_utc
from streams.consolidation.model import (
    EPISODE_DECIDER,
    CandidateRow,
    Origin,
    PlannedCandidate,
    Retired,
    Run,
)
from streams.memory.model import MemoryCandidate, MemoryType, ScopeKind


def run_values(run: Run, now: datetime) -> dict[str, Any]:
    """The ``consolidation_run`` row of a run just claimed."""
    return {"closed_id": run.closed_id, "tenant_id": run.tenant_id,
            "conversation_id": run.conversation_id, "user_id": run.user_id,
            "agent_id": run.agent_id, "provider": run.provider, "long_memory": run.long_memory,
            "status": "claimed", "judge": None, "message_count": run.message_count,
            "candidate_count": 0, "claimed_until_id": run.until_id, "has_more": run.more,
            "created_at": naive_utc(now), "updated_at": naive_utc(now)}


def origin_values(origin: Origin, now: datetime) -> dict[str, Any]:
    """The ``memory_origin`` row of a written memory."""
    r, row = origin.run, origin.row
    return {"tenant_id": r.tenant_id, "provider": r.provider, "memory_id": origin.memory_id,
            "cube": row.cube, "user_id": row.owner(r), "agent_id": r.agent_id,
            "conversation_id": r.conversation_id, "closed_id": r.closed_id,
            "event_time": naive_utc(row.candidate.event_time),
            "written_at": naive_utc(now), "retired_at": None}


def candidate_hash(cube: str, cand: MemoryCandidate) -> str:
    text = "\x1f".join((cube, cand.kind, cand.content, ",".join(cand.source_event_ids)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _row_to_candidate(r: Any) -> CandidateRow:
    cand = MemoryCandidate(
        content=r.content, type=cast(MemoryType, r.type), scope=cast(ScopeKind, r.scope),
        importance=float(r.importance),
        source_event_ids=tuple(json.loads(r.source_event_ids)),
        event_time=aware_utc(r.event_time), kind="episode" if r.kind == "episode" else "fact",
        role=r.role, span=span_of(r), masked=masked_of(r),
    )
    return CandidateRow(
        seq=int(r.seq), cube=r.cube, candidate=cand, action=r.action,
        expire_ids=tuple(json.loads(r.expire_ids or "[]")), decider=r.decider,
        write_started=r.write_started_at is not None, memory_id=r.memory_id,
        expired=r.expired_at is not None, user_id=r.user_id,
    )


class RunStore:
    """The runs and their candidates (the ``Runs`` port of :mod:`streams.consolidation.ports`);
    a run is created with its claim (:meth:`.ledger.LedgerStore.claim_run`)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        # a memory written again (the built-in provider returns the row it holds
        # for the same text and sources) now comes from the run that wrote it last
        self._origin = upsert(engine, memory_origin, ["tenant_id", "provider", "memory_id"],
                              ["cube", "user_id", "agent_id", "conversation_id", "closed_id",
                               "event_time", "written_at", "retired_at"])

    async def get(self, closed_id: str) -> Run | None:
        r = consolidation_run.c
        async with self.engine.connect() as conn:
            row = (await conn.execute(
                select(consolidation_run).where(r.closed_id == closed_id))).first()
        if row is None:
            return None
        return Run(row.closed_id, row.tenant_id, row.conversation_id, row.user_id, row.agent_id,
                   row.provider, bool(row.long_memory), row.status, row.judge,
                   int(row.message_count), int(row.candidate_count),
                   None if row.claimed_until_id is None else int(row.claimed_until_id),
                   bool(row.has_more))

    async def save_judgement(self, closed_id: str, judge: str,
                             planned: Sequence[PlannedCandidate], now: datetime) -> bool:
        """Persist the candidates and move the run to ``judged``; False (and nothing
        written) when another attempt already did."""
        r = consolidation_run.c
        rows = [{
            "closed_id": closed_id, "seq": i, "cand_hash": candidate_hash(p.cube, p.candidate),
            "cube": p.cube, "kind": p.candidate.kind, "type": p.candidate.type,
            "scope": p.candidate.scope, "importance": p.candidate.importance,
            "content": p.candidate.content,
            "source_event_ids": json.dumps(list(p.candidate.source_event_ids)),
            "event_time": naive_utc(p.candidate.event_time),
            "action": "store" if p.episode else None,
            "decider": EPISODE_DECIDER if p.episode else None,
            "expire_ids": None, "reason": None, "write_started_at": None, "memory_id": None,
            "written_at": None, "expired_at": None, "user_id": p.user_id,
            **role_and_span(p.candidate), **masked_column(p.candidate),
        } for i, p in enumerate(planned)]
        async with self.engine.begin() as conn:
            status = (await conn.execute(select(r.status).where(r.closed_id == closed_id)
                                         .with_for_update())).scalar_one_or_none()
            if status != "claimed":
                return False
            if rows:
                await conn.execute(consolidation_candidate.insert(), rows)
            await conn.execute(update(consolidation_run).where(r.closed_id == closed_id).values(
                status="judged", judge=judge, candidate_count=len(rows), updated_at=naive_utc(now)))
        return True

    async def candidates(self, closed_id: str, cube: str | None = None) -> list[CandidateRow]:
        """The run's candidates (of ``cube`` only, when given), by ``seq``."""
        c = consolidation_candidate.c
        q = select(consolidation_candidate).where(
            c.closed_id == closed_id, *(() if cube is None else (c.cube == cube,)))
        async with self.engine.connect() as conn:
            rows = (await conn.execute(q.order_by(c.seq))).all()
        return [_row_to_candidate(r) for r in rows]

    async def save_decisions(self, closed_id: str,
                             decisions: Sequence[tuple[int, str, Sequence[str], str, str]]) -> int:
        """``(seq, action, expire_ids, decider, reason)`` for still undecided candidates;
        returns how many were recorded (fewer: another attempt decided first)."""
        c = consolidation_candidate.c
        stmt = update(consolidation_candidate).where(
            c.closed_id == bindparam("b_closed"), c.seq == bindparam("b_seq"),
            c.action.is_(None)).values(action=bindparam("b_action"),
                                       expire_ids=bindparam("b_expire"),
                                       decider=bindparam("b_decider"), reason=bindparam("b_reason"))
        params = [{"b_closed": closed_id, "b_seq": seq, "b_action": action,
                   "b_expire": json.dumps(list(expire_ids)), "b_decider": decider,
                   "b_reason": reason[:2000]}
                  for seq, action, expire_ids, decider, reason in decisions]
        if not params:
            return 0
        async with self.engine.begin() as conn:
            result = await conn.execute(stmt, params)
        return int(result.rowcount or 0)

    async def skip_unwritten(self, closed_id: str, skips: Sequence[tuple[int, str]],
                             decider: str) -> int:
        """Turn decided, not yet written candidates ``(seq, reason)`` into skips;
        returns how many were changed (none that got a memory id meanwhile)."""
        c = consolidation_candidate.c
        stmt = update(consolidation_candidate).where(
            c.closed_id == bindparam("b_closed"), c.seq == bindparam("b_seq"),
            c.memory_id.is_(None)).values(action="skip", expire_ids="[]", decider=decider,
                                          reason=bindparam("b_reason"))
        params = [{"b_closed": closed_id, "b_seq": seq, "b_reason": reason[:2000]}
                  for seq, reason in skips]
        if not params:
            return 0
        async with self.engine.begin() as conn:
            result = await conn.execute(stmt, params)
        return int(result.rowcount or 0)

    async def reopen_unwritten(self, closed_id: str, seqs: Sequence[int]) -> int:
        """Forget the decisions of candidates not written and not started: they are
        decided again. Returns how many were reopened (fewer: another attempt
        wrote or started one meanwhile)."""
        if not seqs:
            return 0
        c = consolidation_candidate.c
        async with self.engine.begin() as conn:
            result = await conn.execute(update(consolidation_candidate).where(
                c.closed_id == closed_id, c.seq.in_(list(seqs)), c.memory_id.is_(None),
                c.write_started_at.is_(None), c.action.is_not(None)).values(
                action=None, expire_ids="[]", decider=None, reason=None))
        return int(result.rowcount or 0)

    async def drop(self, closed_id: str, seqs: Sequence[int]) -> int:
        """Delete candidates ``seqs`` (an erasure covers their users); how many."""
        if not seqs:
            return 0
        c = consolidation_candidate.c
        async with self.engine.begin() as conn:
            result = await conn.execute(delete(consolidation_candidate).where(
                c.closed_id == closed_id, c.seq.in_(list(seqs))))
        return int(result.rowcount or 0)

    async def mark_write_started(self, closed_id: str, seqs: Sequence[int], now: datetime) -> None:
        c = consolidation_candidate.c
        async with self.engine.begin() as conn:
            await conn.execute(update(consolidation_candidate).where(
                c.closed_id == closed_id, c.seq.in_(list(seqs)), c.write_started_at.is_(None))
                .values(write_started_at=naive_utc(now)))

    async def mark_written(self, closed_id: str, written: Sequence[tuple[int, str]],
                           now: datetime, origins: Sequence[Origin] = ()) -> int:
        """Record the provider's ids, and where each memory came from (``origins``,
        in the same transaction); returns how many ids were recorded now."""
        c = consolidation_candidate.c
        stmt = update(consolidation_candidate).where(
            c.closed_id == bindparam("b_closed"), c.seq == bindparam("b_seq"),
            c.memory_id.is_(None)).values(memory_id=bindparam("b_memory"),
                                          written_at=bindparam("b_at"))
        params = [{"b_closed": closed_id, "b_seq": seq, "b_memory": memory_id,
                   "b_at": naive_utc(now)} for seq, memory_id in written]
        if not params:
            return 0
        async with self.engine.begin() as conn:
            result = await conn.execute(stmt, params)
            if origins:
                await conn.execute(self._origin, [origin_values(o, now) for o in origins])
        return int(result.rowcount or 0)

    async def mark_expired(self, closed_id: str, seq: int, now: datetime,
                           retired: Retired | None = None) -> None:
        """The row's superseded memories are expired; ``retired``: they are gone from
        the provider, their origins say so."""
        async with self.engine.begin() as conn:
            await self.mark_expired_in(conn, closed_id, seq, now, retired)

    @staticmethod
    async def mark_expired_in(conn: AsyncConnection, closed_id: str, seq: int, now: datetime,
                              retired: Retired | None = None) -> None:
        """:meth:`mark_expired` in ``conn``'s transaction (the expiry handed to the
        sweeper is recorded in the same one)."""
        c = consolidation_candidate.c
        await conn.execute(update(consolidation_candidate).where(
            c.closed_id == closed_id, c.seq == seq).values(expired_at=naive_utc(now)))
        await RunStore.retire_origins(conn, retired, now)

    @staticmethod
    async def retire_origins(conn: AsyncConnection, retired: Retired | None,
                             now: datetime) -> None:
        if retired is None or not retired.memory_ids:
            return
        o = memory_origin.c
        await conn.execute(update(memory_origin).where(
            o.tenant_id == retired.tenant_id, o.provider == retired.provider,
            o.memory_id.in_(list(retired.memory_ids)), o.retired_at.is_(None)).values(
            retired_at=naive_utc(now)))

    async def finish(self, closed_id: str, now: datetime) -> None:
        r = consolidation_run.c
        async with self.engine.begin() as conn:
            await conn.execute(update(consolidation_run).where(r.closed_id == closed_id).values(
                status="done", last_error=None, updated_at=naive_utc(now),
                finished_at=naive_utc(now)))

    async def record_error(self, closed_id: str, error: str, now: datetime) -> None:
        r = consolidation_run.c
        async with self.engine.begin() as conn:
            await conn.execute(update(consolidation_run).where(r.closed_id == closed_id).values(
                last_error=error[:4000], updated_at=naive_utc(now)))

    async def purge(self, cutoff: datetime) -> int:
        """Delete the runs done before ``cutoff`` (naive UTC), and the runs left
        ``judged`` that are stale (see :func:`stale_judged`), with their candidates;
        in chunks of :data:`PURGE_CHUNK` runs, each its own transaction. How many."""
        r, c = consolidation_run.c, consolidation_candidate.c
        old = or_(and_(r.status == "done", r.finished_at < cutoff), stale_judged(cutoff))
        total = 0
        while True:
            async with self.engine.begin() as conn:
                ids = [row.closed_id for row in (await conn.execute(
                    select(r.closed_id).where(old).limit(PURGE_CHUNK))).all()]
                if ids:
                    await conn.execute(delete(consolidation_candidate).where(
                        c.closed_id.in_(ids)))
                    await conn.execute(delete(consolidation_run).where(r.closed_id.in_(ids)))
            total += len(ids)
            if len(ids) < PURGE_CHUNK:
                return total


PURGE_CHUNK = 500


def stale_judged(cutoff: datetime) -> ColumnElement[bool]:
    """A run left ``judged`` that nothing resumes any more: no attempt touched it
    since ``cutoff`` (its ``updated_at``: the judgement stored, an error recorded;
    no write of a candidate started or ended since), and no expiry of it is pending
    (the expiry sweeper still works on those). The retry topic gives up on a closing
    event long before a retention of days; one re-driven after the purge starts a
    new run, which claims and judges its messages again."""
    r, c, p = consolidation_run.c, consolidation_candidate.c, pending_expiry.c
    touched = exists().where(c.closed_id == r.closed_id,
                             or_(c.write_started_at >= cutoff, c.written_at >= cutoff))
    pending = exists().where(p.closed_id == r.closed_id)
    return and_(r.status == "judged", r.updated_at < cutoff, ~touched, ~pending)
