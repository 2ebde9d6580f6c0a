"""ReprocessStore: the jobs of ``memstream reprocess`` and what they replace.

A job is planned once, in one transaction: its row, its sessions and the
messages each holds (:mod:`streams.adapters.db.schema.reprocess`). A session
is done when its run (``consolidation_run`` with the session's ``closed_id``)
is done. What a job retires is read from ``memory_origin``: the memories not
retired yet that came from the job's conversations at event times inside one
of its sessions, and that no run of the job wrote (a memory the job wrote
again, same provider id, now has the job's run as its origin and stays).

:class:`ReprocessClaims` is the ledger of a job's runs: the job's sessions
claimed their messages when it was planned, so a claim only counts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from streams.adapters.db.ledger import (
    MESSAGE_COLUMNS,
    LedgerStore,
    SessionMessage,
    session_message,
)
from streams.adapters.db.schema.consolidation import (
    consolidation_progress,
    consolidation_run,
    memory_origin,
)
from streams.adapters.db.schema.conversation import conversation_message
from streams.adapters.db.schema.reprocess import (
    reprocess_job,
    reprocess_message,
    reprocess_session,
)
from streams.clock import aware_utc, naive_utc
from streams.consolidation.rules.reprocess_plan import PlannedSession, Progress, StoredMessage

_m, _o, _s = conversation_message.c, memory_origin.c, reprocess_session.c
_j, _r = reprocess_job.c, consolidation_run.c


@dataclass(frozen=True)
class Job:
    job_id: str
    tenant_id: str
    user_id: str | None
    since: datetime | None  # aware
    status: str  # planned, retiring, done
    sessions: int
    retired: int


@dataclass(frozen=True)
class JobSession:
    closed_id: str
    conversation_id: str
    user_id: str
    agent_id: str
    seq: int
    last_at: datetime  # aware
    message_count: int
    done: bool


@dataclass(frozen=True)
class Retiring:
    """A memory a job replaces."""

    provider: str
    memory_id: str
    cube: str
    user_id: str
    agent_id: str


def session_closed_id(job_id: str, tenant_id: str, conversation_id: str, label: str) -> str:
    return f"{job_id}:{tenant_id}/{conversation_id}#{label}"


class ReprocessStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def conversations(self, tenant_id: str, user_id: str | None) -> list[str]:
        """The tenant's conversations (those ``user_id`` speaks in, when given)."""
        q = select(_m.conversation_id).where(_m.tenant_id == tenant_id)
        if user_id is not None:
            q = q.where(_m.user_id == user_id)
        async with self.engine.connect() as conn:
            return sorted({r[0] for r in (await conn.execute(q.distinct())).all()})

    async def stored(self, tenant_id: str,
                     conversation_id: str) -> tuple[list[StoredMessage], Progress]:
        """A conversation's messages and how far live consolidation took it."""
        p = consolidation_progress.c
        async with self.engine.connect() as conn:
            rows = (await conn.execute(
                select(_m.id, _m.role, _m.user_id, _m.agent_id, _m.created_at, _m.session_seq)
                .where(_m.tenant_id == tenant_id, _m.conversation_id == conversation_id)
                .order_by(_m.id))).all()
            done = (await conn.execute(
                select(p.claimed_session_seq, p.claimed_until_id)
                .where(p.tenant_id == tenant_id, p.conversation_id == conversation_id))).first()
        messages = [StoredMessage(int(r.id), r.role, r.user_id, r.agent_id,
                                  aware_utc(r.created_at), r.session_seq) for r in rows]
        return messages, Progress(int(done[0]), int(done[1])) if done else Progress()

    async def create(self, job: Job, sessions: Sequence[tuple[str, str, PlannedSession]],
                     now: datetime) -> None:
        """The job, its sessions (``closed_id``, conversation, session) and their
        messages, in one transaction."""
        async with self.engine.begin() as conn:
            await conn.execute(reprocess_job.insert().values(
                job_id=job.job_id, tenant_id=job.tenant_id, user_id=job.user_id,
                since=naive_utc(job.since), status="planned", sessions=len(sessions),
                retired=0, created_at=naive_utc(now), updated_at=naive_utc(now)))
            if not sessions:
                return
            await conn.execute(reprocess_session.insert(), [
                {"closed_id": closed_id, "job_id": job.job_id, "seq": i,
                 "conversation_id": conversation_id, "user_id": s.user_id,
                 "agent_id": s.agent_id, "first_at": naive_utc(s.first_at),
                 "last_at": naive_utc(s.last_at), "message_count": len(s.message_ids)}
                for i, (closed_id, conversation_id, s) in enumerate(sessions)])
            await conn.execute(reprocess_message.insert(), [
                {"closed_id": closed_id, "message_id": mid}
                for closed_id, _, s in sessions for mid in s.message_ids])

    async def job(self, job_id: str) -> Job | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(reprocess_job).where(_j.job_id == job_id))).first()
        return None if row is None else _job(row)

    async def unfinished(self, tenant_id: str, user_id: str | None,
                         since: datetime | None) -> Job | None:
        """The newest job of the same request that did not finish, to resume."""
        q = select(reprocess_job).where(
            _j.tenant_id == tenant_id, _j.status != "done",
            _j.user_id.is_(None) if user_id is None else _j.user_id == user_id,
            _j.since.is_(None) if since is None else _j.since == naive_utc(since))
        async with self.engine.connect() as conn:
            row = (await conn.execute(q.order_by(_j.created_at.desc()).limit(1))).first()
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

    def _retiring_query(self, job: Job, cube: str | None = None) -> Any:
        ours = select(_s.closed_id).where(_s.job_id == job.job_id)
        spans = reprocess_session.alias("span")
        inside = select(spans.c.closed_id).where(
            spans.c.job_id == job.job_id, spans.c.conversation_id == _o.conversation_id,
            spans.c.first_at <= _o.event_time, spans.c.last_at >= _o.event_time).exists()
        q = select(_o.provider, _o.memory_id, _o.cube, _o.user_id, _o.agent_id).where(
            _o.tenant_id == job.tenant_id, _o.retired_at.is_(None),
            _o.closed_id.not_in(ours), inside)
        return q if cube is None else q.where(_o.cube == cube)

    async def retiring(self, job: Job, cube: str | None = None) -> list[Retiring]:
        """What the job replaces (of ``cube`` only, when given)."""
        async with self.engine.connect() as conn:
            rows = (await conn.execute(self._retiring_query(job, cube))).all()
        return [Retiring(r.provider, r.memory_id, r.cube, r.user_id, r.agent_id) for r in rows]

    async def retired(self, job: Job, memories: Sequence[Retiring], now: datetime) -> None:
        if not memories:
            return
        async with self.engine.begin() as conn:
            for m in memories:
                await conn.execute(update(memory_origin).where(
                    _o.tenant_id == job.tenant_id, _o.provider == m.provider,
                    _o.memory_id == m.memory_id).values(retired_at=naive_utc(now)))
            await conn.execute(update(reprocess_job).where(_j.job_id == job.job_id).values(
                retired=_j.retired + len(memories), updated_at=naive_utc(now)))

    async def hidden(self, closed_id: str, cube: str) -> set[str]:
        """The ids a job's run must not see in ``cube``: what its job replaces."""
        async with self.engine.connect() as conn:
            job_id = (await conn.execute(select(_s.job_id).where(
                _s.closed_id == closed_id))).scalar()
        job = None if job_id is None else await self.job(job_id)
        return set() if job is None else {m.memory_id for m in await self.retiring(job, cube)}

    async def replaced_by(self, tenant_id: str,
                          planned: Sequence[tuple[str, PlannedSession]]) -> int:
        """How many memories held now came from inside the planned sessions."""
        found: set[tuple[str, str]] = set()
        async with self.engine.connect() as conn:
            for conv, s in planned:
                rows = await conn.execute(select(_o.provider, _o.memory_id).where(
                    _o.tenant_id == tenant_id, _o.conversation_id == conv,
                    _o.retired_at.is_(None), _o.event_time >= naive_utc(s.first_at),
                    _o.event_time <= naive_utc(s.last_at)))
                found.update((r.provider, r.memory_id) for r in rows)
        return len(found)

    async def messages(self, tenant_id: str, ids: Sequence[int]) -> list[SessionMessage]:
        """Stored messages by id, oldest first."""
        out: list[SessionMessage] = []
        async with self.engine.connect() as conn:
            for i in range(0, len(ids), 500):
                q = select(*MESSAGE_COLUMNS).where(_m.tenant_id == tenant_id,
                                                    _m.id.in_(list(ids[i:i + 500])))
                out += [session_message(r) for r in (await conn.execute(q)).all()]
        return sorted(out, key=lambda m: m.id)

    async def set_status(self, job_id: str, status: str, now: datetime) -> None:
        done = {"finished_at": naive_utc(now)} if status == "done" else {}
        async with self.engine.begin() as conn:
            await conn.execute(update(reprocess_job).where(_j.job_id == job_id).values(
                status=status, updated_at=naive_utc(now), **done))

    async def written(self, job_id: str) -> int:
        """How many memories the job's runs wrote (still theirs)."""
        ours = select(_s.closed_id).where(_s.job_id == job_id)
        async with self.engine.connect() as conn:
            return int((await conn.execute(select(func.count()).select_from(memory_origin)
                                           .where(_o.closed_id.in_(ours)))).scalar_one())


def _job(row: Any) -> Job:
    return Job(row.job_id, row.tenant_id, row.user_id, aware_utc(row.since), row.status,
               int(row.sessions), int(row.retired))


class ReprocessClaims(LedgerStore):
    """The ledger of a job's runs: their messages were fixed when it was planned."""

    async def claim(self, conn: AsyncConnection, *, tenant_id: str, conversation_id: str,
                    closed_id: str, session_seq: int, bound: datetime, limit: int,
                    now: datetime, until_event_id: str | None = None,
                    late_since: datetime | None = None) -> int:
        x = reprocess_message.c
        return int((await conn.execute(select(func.count()).select_from(reprocess_message)
                                       .where(x.closed_id == closed_id))).scalar_one())

    async def claimed_messages(self, tenant_id: str, closed_id: str) -> list[SessionMessage]:
        x = reprocess_message.c
        q = (select(*MESSAGE_COLUMNS)
             .select_from(conversation_message.join(reprocess_message, and_(
                 x.message_id == _m.id, x.closed_id == closed_id)))
             .where(_m.tenant_id == tenant_id).order_by(_m.id))
        async with self.engine.connect() as conn:
            return [session_message(r) for r in (await conn.execute(q)).all()]
