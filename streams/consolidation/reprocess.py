"""Reprocessor: rebuild a tenant's long-term memories from the durable history.

After the judge, its model or its rules change, ``memstream reprocess`` runs
every finished session again (:mod:`streams.consolidation.rules.reprocess_plan`)
through the consolidation pipeline, as runs of their own, and only then retires
the memories those sessions had produced before:

1. **plan** (one transaction): the job, its sessions and their messages. An
   unfinished job of the same request is resumed instead of planning again.
2. **rebuild**: each session as a run (``closed_id`` ``{job}:{tenant}/
   {conversation}#{n}``), oldest first, resumable like any run. Its conflict
   checks do not see the memories being replaced, so a fact is written again
   rather than skipped as a duplicate of what is about to go; they do see
   what the job has written so far and everything outside it.
3. **retire**: the replaced memories (``memory_origin``: the job's
   conversations, inside one of its sessions, written by another run) are
   expired through their provider. Queries find the old memories until the
   new ones are written, and both for a moment: never neither.

A memory the job writes exactly as before (same text and sources: the built-in
provider keeps its id) stays as it is, superseded or not. Repeating a finished
job's request plans a new job; with the rule judge it writes nothing new and
retires nothing.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from streams.adapters.db.reprocess_store import (
    Job,
    JobSession,
    ReprocessStore,
    Retiring,
    session_closed_id,
)
from streams.adapters.db.runs import PlannedCandidate, Run
from streams.consolidation.pipeline import ConsolidationPipeline
from streams.consolidation.rules.reprocess_plan import PlannedSession, plan_sessions
from streams.memory.provider import Scope
from streams.memory.rules.routing import long_memory_enabled, route
from streams.wire.records import SessionClosed

Progress = Callable[[int, int], None]  # sessions done, sessions in all


@dataclass(frozen=True)
class ReprocessRequest:
    tenant_id: str
    user_id: str | None = None
    since: datetime | None = None  # aware


@dataclass
class Report:
    job_id: str
    resumed: bool
    sessions: int
    messages: int
    written: int = 0
    retired: int = 0


@dataclass
class Preview:
    """What a job would do, without doing it."""

    sessions: int
    messages: int
    conversations: int
    replaced: int  # memories held now that the rebuilt sessions produced
    candidates: list[dict[str, str]] = field(default_factory=list)


def new_job_id() -> str:
    return f"rp-{uuid.uuid4().hex[:12]}"


class Reprocessor:
    def __init__(self, store: ReprocessStore, pipeline: ConsolidationPipeline, *,
                 gap_s: float, clock: Callable[[], float] = time.time,
                 job_ids: Callable[[], str] = new_job_id) -> None:
        self.store = store
        self.pipeline = pipeline
        self.gap_s = gap_s
        self.clock = clock
        self.job_ids = job_ids

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    async def plan(self, req: ReprocessRequest) -> list[tuple[str, PlannedSession]]:
        """The sessions to rebuild, with their conversations, oldest first."""
        out = []
        for conv in await self.store.conversations(req.tenant_id, req.user_id):
            messages, done = await self.store.stored(req.tenant_id, conv)
            out += [(conv, s) for s in plan_sessions(
                messages, done, gap_s=self.gap_s, since=req.since, user=req.user_id)]
        return sorted(out, key=lambda cs: (cs[1].first_at, cs[0], cs[1].label))

    async def start(self, req: ReprocessRequest) -> tuple[Job, bool]:
        """The request's unfinished job (resumed: True), else a new one, planned."""
        job = await self.store.unfinished(req.tenant_id, req.user_id, req.since)
        if job is not None:
            return job, True
        job = Job(self.job_ids(), req.tenant_id, req.user_id, req.since, "planned", 0, 0)
        planned = await self.plan(req)
        await self.store.create(job, [
            (session_closed_id(job.job_id, req.tenant_id, conv, s.label), conv, s)
            for conv, s in planned], self._now())
        stored = await self.store.job(job.job_id)
        assert stored is not None
        return stored, False

    async def preview(self, req: ReprocessRequest, *, judge: bool = True) -> Preview:
        """The plan, the memories it replaces, and (``judge``) what the judge makes
        of the sessions now; nothing is written."""
        planned = await self.plan(req)
        replaced = await self.store.replaced_by(req.tenant_id, planned)
        out = Preview(len(planned), sum(len(s.message_ids) for _, s in planned),
                      len({c for c, _ in planned}), replaced)
        if not judge:
            return out
        p = self.pipeline
        for conv, s in planned:
            agent = p.configs.get(req.tenant_id, s.agent_id)
            if not long_memory_enabled(agent, default_for_unknown=p.config.default_long_memory):
                continue
            handle = p.registry.get(route(agent))
            run = Run("preview", req.tenant_id, conv, s.user_id, s.agent_id, handle.route, True)
            messages = await self.store.messages(req.tenant_id, s.message_ids)
            _, candidates = await p.candidates(
                run, messages, handle, p.models.for_agent(agent.model if agent else None))
            out.candidates += [_describe(conv, c) for c in candidates]
        return out

    async def run(self, job: Job, progress: Progress | None = None) -> Report:
        """Rebuild the job's sessions not done yet, then retire what they replace."""
        sessions = await self.store.sessions(job.job_id)
        report = Report(job.job_id, False, len(sessions),
                        sum(s.message_count for s in sessions))
        done = sum(1 for s in sessions if s.done)
        if progress:
            progress(done, len(sessions))
        for s in sessions:
            if s.done:
                continue
            await self.pipeline.run(self._closed(job, s))
            done += 1
            if progress:
                progress(done, len(sessions))
        await self.store.set_status(job.job_id, "retiring", self._now())
        retiring = await self.store.retiring(job)
        for group in _by_scope(retiring).values():
            first = group[0]
            handle = self.pipeline.registry.get(first.provider)
            await handle.provider.expire(Scope(job.tenant_id, first.user_id, first.agent_id),
                                         first.cube, [m.memory_id for m in group], None)
            await self.store.retired(job, group, self._now())
        await self.store.set_status(job.job_id, "done", self._now())
        final = await self.store.job(job.job_id)
        report.retired = final.retired if final else len(retiring)
        report.written = await self.store.written(job.job_id)
        return report

    def _closed(self, job: Job, s: JobSession) -> SessionClosed:
        return SessionClosed(
            closed_id=s.closed_id, tenant_id=job.tenant_id, user_id=s.user_id,
            agent_id=s.agent_id, conversation_id=s.conversation_id, trigger="explicit",
            session_seq=s.seq + 1, closed_at=s.last_at, last_activity=s.last_at,
            message_count=s.message_count)


def _by_scope(memories: list[Retiring]) -> dict[tuple[str, str, str, str], list[Retiring]]:
    out: dict[tuple[str, str, str, str], list[Retiring]] = {}
    for m in memories:
        out.setdefault((m.provider, m.cube, m.user_id, m.agent_id), []).append(m)
    return out


def _describe(conversation_id: str, p: PlannedCandidate) -> dict[str, str]:
    return {"conversation_id": conversation_id, "cube": p.cube,
            "user_id": p.user_id or "", "kind": p.candidate.kind, "type": p.candidate.type,
            "content": p.candidate.content}
