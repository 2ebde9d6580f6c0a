"""ReprocessStore: the jobs of ``memstream reprocess`` and what they replace.

A job is planned once, in one transaction: its row, its sessions, the messages
each holds and the memories it replaces (:mod:`streams.adapters.db.schema.reprocess`).
A tenant has at most one unfinished job (a unique ``active`` column: creating
a second raises :class:`~streams.consolidation.model.JobConflict`). A session is done when its run
(``consolidation_run`` with the session's ``closed_id``) is done.

What a job replaces is fixed when it is planned: the memories of
``memory_origin`` not retired yet that came from the job's conversations at
event times inside one of its sessions. Of those, a memory the job writes
again (same provider id: the built-in provider keeps it for the same text and
sources) has the job's run as its origin from then on, and is kept.

The runs of a job read their messages through
:class:`~streams.adapters.db.reprocess_claims.ReprocessClaims`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, insert, literal, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from streams.adapters.db.ledger import MESSAGE_COLUMNS, session_message
from streams.adapters.db.reprocess_claims import distinct_messages
from streams.adapters.db.schema.consolidation import (
    consolidation_progress,
    consolidation_run,
    memory_origin,
)
from streams.adapters.db.schema.conversation import conversation_message
from streams.adapters.db.schema.memory import memory
from streams.adapters.db.schema.reprocess import (
    reprocess_job,
    reprocess_message,
    reprocess_retire,
    reprocess_session,
)
from streams.clock import aware_utc, naive_utc
from streams.consolidation.model import (
    Counts,
    Job,
    JobConflict,
    JobSession,
    Retiring,
    SessionMessage,
)
from streams.consolidation.rules.reprocess_plan import PlannedSession, Progress, StoredMessage
from streams.erasure.model import BUILTIN
from streams.memory.model import USER_CUBE

_m, _o, _s = conversation_message.c, memory_origin.c, reprocess_session.c
_j, _r, _x = reprocess_job.c, consolidation_run.c, reprocess_retire.c
FINISHED = ("done", "abandoned")


class ReprocessStore:
    """The jobs (the ``ReprocessJobs`` port of :mod:`streams.consolidation.ports`)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def conversations(self, tenant_id: str, user_id: str | None) -> list[str]:
        """The tenant's conversations (those ``user_id`` speaks in, when given)."""
        q = select(_m.conversation_id).where(_m.tenant_id == tenant_id)
        if user_id is not None:
            q = q.where(_m.user_id == user_id)
        async with self.engine.connect() as conn:
            return sorted({r[0] for r in (await conn.execute(q.distinct())).all()})

    async def stored(self, tenant_id: str, conversation_id: str,
                     ) -> tuple[list[StoredMessage], Progress, bool]:
        """A conversation's messages, how far live consolidation took it, and
        whether a live run of it is still unfinished (the conversation is busy)."""
        p = consolidation_progress.c
        conv = (_m.tenant_id == tenant_id, _m.conversation_id == conversation_id)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(
                select(_m.id, _m.role, _m.user_id, _m.agent_id, _m.created_at, _m.session_seq)
                .where(*conv).order_by(_m.id))).all()
            done = (await conn.execute(
                select(p.claimed_session_seq, p.claimed_until_id)
                .where(p.tenant_id == tenant_id, p.conversation_id == conversation_id))).first()
            busy = (await conn.execute(select(_r.closed_id).where(
                _r.tenant_id == tenant_id, _r.conversation_id == conversation_id,
                _r.status != "done", _r.closed_id.not_in(select(_s.closed_id))).limit(1))
            ).first() is not None
        messages = [StoredMessage(int(r.id), r.role, r.user_id, r.agent_id,
                                  aware_utc(r.created_at), r.session_seq) for r in rows]
        return messages, Progress(int(done[0]), int(done[1])) if done else Progress(), busy

    async def create(self, job: Job, sessions: Sequence[tuple[str, str, PlannedSession]],
                     now: datetime) -> Job:
        """The job, its sessions (``closed_id``, conversation, session), their
        messages and what it replaces, in one transaction; :class:`JobConflict`
        when the tenant has an unfinished job."""
        try:
            async with self.engine.begin() as conn:
                await conn.execute(reprocess_job.insert().values(
                    job_id=job.job_id, tenant_id=job.tenant_id, user_id=job.user_id,
                    since=naive_utc(job.since), status="planned", active=job.tenant_id,
                    sessions=len(sessions), retired=0, created_at=naive_utc(now),
                    updated_at=naive_utc(now)))
                if sessions:
                    await self._plan(conn, job, sessions)
        except IntegrityError:
            other = await self.unfinished(job.tenant_id)
            if other is None:
                raise
            raise JobConflict(other) from None
        created = await self.job(job.job_id)
        assert created is not None
        return created

    @staticmethod
    async def _plan(conn: AsyncConnection, job: Job,
                    sessions: Sequence[tuple[str, str, PlannedSession]]) -> None:
        await conn.execute(reprocess_session.insert(), [
            {"closed_id": closed_id, "job_id": job.job_id, "seq": i,
             "conversation_id": conversation_id, "user_id": s.user_id,
             "agent_id": s.agent_id, "first_at": naive_utc(s.first_at),
             "last_at": naive_utc(s.last_at), "message_count": len(s.message_ids)}
            for i, (closed_id, conversation_id, s) in enumerate(sessions)])
        await conn.execute(reprocess_message.insert(), [
            {"closed_id": closed_id, "message_id": mid}
            for closed_id, _, s in sessions for mid in s.message_ids])
        inside = select(_s.closed_id).where(
            _s.job_id == job.job_id, _s.conversation_id == _o.conversation_id,
            _s.first_at <= _o.event_time, _s.last_at >= _o.event_time).exists()
        await conn.execute(insert(reprocess_retire).from_select(
            ["job_id", "provider", "memory_id", "cube", "user_id", "agent_id"],
            select(literal(job.job_id), _o.provider, _o.memory_id, _o.cube, _o.user_id,
                   _o.agent_id).where(_o.tenant_id == job.tenant_id,
                                      _o.retired_at.is_(None), inside)))

    async def job(self, job_id: str) -> Job | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(reprocess_job).where(_j.job_id == job_id))).first()
        return None if row is None else _job(row)

    async def unfinished(self, tenant_id: str) -> Job | None:
        """The tenant's unfinished job, if any."""
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(reprocess_job).where(
                _j.active == tenant_id))).first()
        return None if row is None else _job(row)

    async def sessions(self, job_id: str) -> list[JobSession]:
        q = (select(reprocess_session, _r.status)
             .select_from(reprocess_session.outerjoin(
                 consolidation_run, _r.closed_id == _s.closed_id))
             .where(_s.job_id == job_id).order_by(_s.seq))
        async with self.engine.connect() as conn:
            rows = (await conn.execute(q)).all()
        return [JobSession(r.closed_id, r.conversation_id, r.user_id, r.agent_id, int(r.seq),
                           aware_utc(r.last_at), int(r.message_count), r.status == "done")
                for r in rows]

    def _replaced(self, job: Job) -> Any:
        """The job's replaced memories it did not write again, not retired yet."""
        ours = select(_o.memory_id).select_from(memory_origin.join(
            reprocess_session, _s.closed_id == _o.closed_id)).where(
            _s.job_id == job.job_id, _o.tenant_id == job.tenant_id,
            _o.provider == _x.provider, _o.memory_id == _x.memory_id).exists()
        return select(_x.provider, _x.memory_id, _x.cube, _x.user_id, _x.agent_id).where(
            _x.job_id == job.job_id, _x.retired_at.is_(None), ~ours)

    async def retiring(self, job: Job) -> list[Retiring]:
        """The job's memories to retire, with the text of the built-in provider's
        (its expiry keeps the row; the other providers' deletes)."""
        async with self.engine.connect() as conn:
            rows = (await conn.execute(self._replaced(job))).all()
            ids = [int(r.memory_id) for r in rows
                   if r.provider == BUILTIN and r.memory_id.isdigit()]
            texts = {str(t.id): t.content for t in (await conn.execute(
                select(memory.c.id, memory.c.content).where(
                    memory.c.tenant_id == job.tenant_id, memory.c.id.in_(ids))) if ids
                else [])}
        return [Retiring(r.provider, r.memory_id, r.cube, r.user_id, r.agent_id,
                         texts.get(r.memory_id) if r.provider == BUILTIN else None)
                for r in rows]

    async def hidden(self, closed_id: str, cube: str, user_id: str) -> set[str]:
        """The ids a job's run must not see in ``cube`` (as written for ``user_id``):
        what its job replaces there."""
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(reprocess_job).select_from(reprocess_job.join(
                reprocess_session, _s.job_id == _j.job_id)).where(
                _s.closed_id == closed_id))).first()
            if row is None:
                return set()
            q = self._replaced(_job(row)).where(_x.cube == cube)
            if cube == USER_CUBE:
                q = q.where(_x.user_id == user_id)
            rows = await conn.execute(q)
            return {r.memory_id for r in rows}

    async def retired(self, job: Job, memories: Sequence[Retiring], now: datetime) -> int:
        """Record ``memories`` as retired; how many were not recorded before."""
        n = 0
        async with self.engine.begin() as conn:
            for m in memories:
                result = await conn.execute(update(reprocess_retire).where(
                    _x.job_id == job.job_id, _x.provider == m.provider,
                    _x.memory_id == m.memory_id, _x.retired_at.is_(None)).values(
                    retired_at=naive_utc(now)))
                n += int(result.rowcount or 0)
                await conn.execute(update(memory_origin).where(
                    _o.tenant_id == job.tenant_id, _o.provider == m.provider,
                    _o.memory_id == m.memory_id).values(retired_at=naive_utc(now)))
            await conn.execute(update(reprocess_job).where(_j.job_id == job.job_id).values(
                retired=_j.retired + n, updated_at=naive_utc(now)))
        return n

    async def providers(self, job: Job) -> set[str]:
        """The providers holding what the job replaces."""
        async with self.engine.connect() as conn:
            return {r[0] for r in await conn.execute(
                select(_x.provider).where(_x.job_id == job.job_id).distinct())}

    async def finish(self, job_id: str, status: str, now: datetime) -> None:
        """Move the job to ``status``; ``done`` or ``abandoned`` frees its tenant."""
        values: dict[str, Any] = {"status": status, "updated_at": naive_utc(now)}
        if status in FINISHED:
            values.update(finished_at=naive_utc(now), active=None)
        async with self.engine.begin() as conn:
            await conn.execute(update(reprocess_job).where(_j.job_id == job_id).values(**values))

    async def counts(self, job: Job) -> Counts:
        mine = (select(_o.provider, _o.memory_id)
                .select_from(memory_origin.join(reprocess_session, _s.closed_id == _o.closed_id))
                .where(_s.job_id == job.job_id, _o.tenant_id == job.tenant_id).subquery())
        kept = select(func.count()).select_from(mine.join(reprocess_retire, and_(
            _x.job_id == job.job_id, _x.provider == mine.c.provider,
            _x.memory_id == mine.c.memory_id)))
        async with self.engine.connect() as conn:
            total = int((await conn.execute(select(func.count()).select_from(mine))).scalar_one())
            same = int((await conn.execute(kept)).scalar_one())
        return Counts(total - same, same)

    async def held(self, tenant_id: str,
                   planned: Sequence[tuple[str, PlannedSession]]) -> int:
        """How many memories held now came from inside the planned sessions."""
        spans: dict[str, list[tuple[datetime, datetime]]] = {}
        for conv, s in planned:
            spans.setdefault(conv, []).append((naive_utc(s.first_at), naive_utc(s.last_at)))
        found: set[tuple[str, str]] = set()
        async with self.engine.connect() as conn:
            for conv, within in spans.items():  # one read per conversation
                rows = await conn.execute(select(_o.provider, _o.memory_id, _o.event_time).where(
                    _o.tenant_id == tenant_id, _o.conversation_id == conv,
                    _o.retired_at.is_(None)))
                found.update((r.provider, r.memory_id) for r in rows
                             if any(a <= r.event_time <= b for a, b in within))
        return len(found)

    async def messages(self, tenant_id: str, ids: Sequence[int]) -> list[SessionMessage]:
        """Stored messages by id, oldest first, each content hash once."""
        out: list[SessionMessage] = []
        async with self.engine.connect() as conn:
            for i in range(0, len(ids), 500):
                q = select(*MESSAGE_COLUMNS).where(
                    _m.tenant_id == tenant_id, _m.id.in_(list(ids[i:i + 500])))
                out += [session_message(r) for r in (await conn.execute(q)).all()]
        return distinct_messages(tenant_id, sorted(out, key=lambda m: m.id))


def _job(row: Any) -> Job:
    return Job(row.job_id, row.tenant_id, row.user_id, aware_utc(row.since), row.status,
               int(row.sessions), int(row.retired))
