"""Reprocessor: rebuild a tenant's long-term memories from the durable history.

After the judge, its model or its rules change, ``memstream reprocess`` runs
every finished session again (:mod:`streams.consolidation.rules.reprocess_plan`)
through the consolidation pipeline, as runs of their own, and only then retires
the memories those sessions had produced before:

1. **plan** (one transaction): the job, its sessions, their messages and the
   memories it replaces. A tenant has one unfinished job at a time: the same
   request resumes it, another is refused (:class:`JobConflict`) until it is
   finished or abandoned. A conversation with a live run still unfinished is
   left out (it is busy; reprocess it later).
2. **rebuild**: each session as a run (``closed_id`` ``{job}:{tenant}/
   {conversation}#{n}``), oldest first, resumable like any run. Its conflict
   checks do not see the memories being replaced, so a fact is written again
   rather than skipped as a duplicate of what is about to go; they do see
   what the job has written so far and everything outside it.
3. **retire**: the replaced memories the job did not write again are expired
   through their provider. Queries find the old memories until the new ones
   are written, and both for a moment: never neither. One whose text holds what
   the sensitive-content policy in force does not keep as said (a policy
   tightened since it was stored: the rebuild masked or dropped it) is deleted
   instead (``forget``), so no expired row keeps it; MemOS and Mem0 delete on
   expiry anyway.

One process runs a tenant's job at a time (a lock held for the whole run:
:class:`ReprocessBusy` for a second one). Every provider the job writes to or
retires from must be configured before anything is done.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from streams.consolidation.model import (
    Job,
    JobConflict,
    JobSession,
    PlannedCandidate,
    Retiring,
    Run,
    session_closed_id,
)
from streams.consolidation.pipeline import ConsolidationPipeline
from streams.consolidation.ports import ReprocessJobs
from streams.consolidation.rules.reprocess_plan import PlannedSession, plan_sessions
from streams.memory.cube_locks import CubeLocks, CubeLockTimeout
from streams.memory.model import CubeKey
from streams.memory.provider import Scope
from streams.memory.registry import ProviderNotConfigured
from streams.memory.rules.routing import long_memory_enabled, route
from streams.wire.records import SessionClosed

__all__ = ["JobConflict", "Plan", "ReprocessBusy", "ReprocessRequest", "Reprocessor"]
Progress = Callable[[int, int], None]  # sessions done, sessions in all
JOB_LOCK = "#reprocess"  # a lock name no cube has (cubes are user_profile, agent_*)


class ReprocessBusy(Exception):
    """Another process is running the tenant's job."""


@dataclass(frozen=True)
class ReprocessRequest:
    tenant_id: str
    user_id: str | None = None
    since: datetime | None = None  # aware

    def same_as(self, job: Job) -> bool:
        return (job.tenant_id, job.user_id, job.since) == (self.tenant_id, self.user_id,
                                                            self.since)


@dataclass(frozen=True)
class Plan:
    sessions: list[tuple[str, PlannedSession]]  # (conversation, session), oldest first
    busy: list[str]  # conversations left out: a live run of theirs is unfinished


@dataclass
class Report:
    job_id: str | None
    resumed: bool
    sessions: int
    messages: int
    busy_conversations: list[str] = field(default_factory=list)
    written: int = 0  # memories stored under new ids
    kept: int = 0  # replaced memories written again as they were (same id)
    retired: int = 0


@dataclass
class Preview:
    """What a job would do, without doing it."""

    sessions: int
    messages: int
    conversations: int
    held: int  # memories held now that came from these sessions
    busy_conversations: list[str] = field(default_factory=list)
    candidates: list[dict[str, str]] = field(default_factory=list)


def new_job_id() -> str:
    return f"rp-{uuid.uuid4().hex[:12]}"


class Reprocessor:
    def __init__(self, store: ReprocessJobs, pipeline: ConsolidationPipeline,
                 locks: CubeLocks, *, gap_s: float, clock: Callable[[], float] = time.time,
                 job_ids: Callable[[], str] = new_job_id) -> None:
        self.store = store
        self.pipeline = pipeline
        self.locks = locks
        self.gap_s = gap_s
        self.clock = clock
        self.job_ids = job_ids

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    async def plan(self, req: ReprocessRequest) -> Plan:
        out, busy = [], []
        for conv in await self.store.conversations(req.tenant_id, req.user_id):
            messages, done, unfinished = await self.store.stored(req.tenant_id, conv)
            sessions = plan_sessions(messages, done, gap_s=self.gap_s, since=req.since,
                                     user=req.user_id)
            if unfinished and sessions:
                busy.append(conv)
                continue
            out += [(conv, s) for s in sessions]
        return Plan(sorted(out, key=lambda cs: (cs[1].first_at, cs[0], cs[1].label)), busy)

    async def start(self, req: ReprocessRequest) -> tuple[Job | None, bool, Plan | None]:
        """The tenant's unfinished job of this request (resumed: True), else a new
        one, planned; no job when there is nothing to rebuild. :class:`JobConflict`
        when the tenant's unfinished job is of another request."""
        job = await self.store.unfinished(req.tenant_id)
        if job is not None:
            if not req.same_as(job):
                raise JobConflict(job)
            return job, True, None
        plan = await self.plan(req)
        if not plan.sessions:
            return None, False, plan
        fresh = Job(self.job_ids(), req.tenant_id, req.user_id, req.since, "planned", 0, 0)
        try:
            created = await self.store.create(fresh, [
                (session_closed_id(fresh.job_id, req.tenant_id, conv, s.label), conv, s)
                for conv, s in plan.sessions], self._now())
        except JobConflict as exc:  # another process planned the same moment
            if not req.same_as(exc.job):
                raise
            return exc.job, True, None
        return created, False, plan

    async def abandon(self, tenant_id: str) -> Job | None:
        """Give the tenant's unfinished job up: what it wrote stays, nothing more is
        retired. The job abandoned, or None when there was none."""
        job = await self.store.unfinished(tenant_id)
        if job is not None:
            await self.store.finish(job.job_id, "abandoned", self._now())
        return job

    async def preview(self, req: ReprocessRequest, *, judge: bool = True) -> Preview:
        """The plan, the memories held from it, and (``judge``) what the judge
        makes of the sessions now; nothing is written."""
        plan = await self.plan(req)
        out = Preview(len(plan.sessions), sum(len(s.message_ids) for _, s in plan.sessions),
                      len({c for c, _ in plan.sessions}),
                      await self.store.held(req.tenant_id, plan.sessions), plan.busy)
        if not judge:
            return out
        p = self.pipeline
        for conv, s in plan.sessions:
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
        try:
            async with self.locks.hold(CubeKey(job.tenant_id, JOB_LOCK, "")):
                return await self._run(job, progress)
        except CubeLockTimeout:
            raise ReprocessBusy(f"another process is running job {job.job_id} of tenant "
                                f"{job.tenant_id!r}") from None

    async def _run(self, job: Job, progress: Progress | None) -> Report:
        sessions = await self.store.sessions(job.job_id)
        self._check_providers(job, sessions, await self.store.providers(job))
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
        await self.store.finish(job.job_id, "retiring", self._now())
        for group in _by_scope(await self.store.retiring(job)).values():
            first = group[0]
            provider = self.pipeline.registry.get(first.provider).provider
            scope = Scope(job.tenant_id, first.user_id, first.agent_id)
            gone = await self._kept_out(job.tenant_id, first.agent_id, group)
            if gone:
                await provider.forget(scope, first.cube, gone)
            kept = [m.memory_id for m in group if m.memory_id not in gone]
            if kept:
                await provider.expire(scope, first.cube, kept, None)
            await self.store.retired(job, group, self._now())
        await self.store.finish(job.job_id, "done", self._now())
        final = await self.store.job(job.job_id)
        counts = await self.store.counts(job)
        report.written, report.kept = counts.written, counts.kept
        report.retired = final.retired if final else 0
        return report

    async def _kept_out(self, tenant_id: str, agent_id: str,
                        group: list[Retiring]) -> list[str]:
        """The ids of ``group`` whose text holds what the agent's sensitive-content
        policy now keeps out (none when nothing is screened or no text is held)."""
        screening = self.pipeline.screening
        known = [m for m in group if m.text is not None]
        if screening is None or not known:
            return []
        policy = self.pipeline.policy_of(tenant_id, agent_id)
        out = await screening.kept_out([m.text or "" for m in known], policy)
        return [m.memory_id for m, held in zip(known, out, strict=True) if held]

    def _check_providers(self, job: Job, sessions: list[JobSession], held: set[str]) -> None:
        p = self.pipeline
        needed = set(held)
        for s in sessions:
            agent = p.configs.get(job.tenant_id, s.agent_id)
            if long_memory_enabled(agent, default_for_unknown=p.config.default_long_memory):
                needed.add(route(agent))
        missing = sorted(n for n in needed if n not in p.registry.configured())
        if missing:
            raise ProviderNotConfigured(
                f"job {job.job_id} writes to or retires from {', '.join(missing)}, which is "
                "not configured here; configure it and run the same request again, or "
                "abandon the job", provider=missing[0], operation="reprocess")

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
