"""ConsolidationPipeline: one closing event, from claim to done, resumable.

``run(closed)`` is idempotent on ``closed.closed_id``: it looks the run up and
continues from its recorded state, so it may be called again after any
failure, a SIGKILL included:

========== ================================================================
no run     route the agent, then claim messages and create the run (one
           transaction: :meth:`.ports.Ledger.claim_run`)
claimed    judge the claimed messages, dedup, add episodes; persist them
judged     decide, write and expire per cube (:class:`.writer.MemoryWriter`)
           then the summary, then ``done``
done       nothing: the event was consolidated before
========== ================================================================

A run claims at most ``max_messages`` messages and ``max_bytes`` of text of
its session (:mod:`.rules.parts`). When the session has more, the outcome
carries the closing event of the next part (``next``), to be sent once this
part is done; a part found done again still hands it on while the next part's
run does not exist, so a crash between the two loses no part.

Erasures are read afresh before the run, once judged (candidates of users an
erasure covers by then are not stored), once the candidates are read (those of
users erased while they were stored are dropped from the run) and under each
cube's lock (:class:`.writer.MemoryWriter`), always about the users the
candidates belong to, not only the user who closed the session: in a group
chat the closing event may name another speaker than the erased one.

What the judge and the episodes make of the messages is screened for sensitive
content (:class:`.screening.Screening`) before the candidates are saved with the
run, and the summary before it is stored: nothing a tenant's policy keeps out
reaches a candidate row, a provider or the summary table.

Every model call of a run is counted for the run's tenant and agent (a
:class:`~.ports.ModelCaller` handed to the judge, the writer and the summarizer,
with a tally of the run's tokens, recorded per consolidated message at the end).
A tenant over its daily token budget (:class:`~.ports.ModelBudget`) has its run
done without the model: the rule judge, rule conflict decisions, an extractive
summary.

Exceptions propagate; the processor classifies them (retry topic, dead letter,
or retry in place while the database is down).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from streams import tracing
from streams.clock import naive_utc
from streams.consolidation.cube_quota import CubeQuota
from streams.consolidation.judge import MemoryJudge
from streams.consolidation.model import CandidateRow, PlannedCandidate, Run, SessionMessage
from streams.consolidation.ports import (
    ChatCompleter,
    Ledger,
    ModelBudget,
    ModelCaller,
    ModelTally,
    Runs,
)
from streams.consolidation.rules.attribution import Author, attributed_user
from streams.consolidation.rules.dedup import dedup_candidates, drop_covered_by_episodes
from streams.consolidation.rules.llm_judge import clip_text
from streams.consolidation.rules.parts import PartBound, next_id, previous_id
from streams.consolidation.rules.passages import passages
from streams.consolidation.rules.sensitive.policy import Policy
from streams.consolidation.rules.summary import CHAT_ROLES
from streams.consolidation.screening import Screening
from streams.consolidation.summarizer import Summarizer
from streams.consolidation.writer import MemoryWriter, WriteStats
from streams.erasure.rules.coverage import ErasureIndex
from streams.memory.agent_configs import AgentConfigs
from streams.memory.model import USER_CUBE, MemoryCandidate, cube_for
from streams.memory.registry import ModelFactory, ProviderHandle, ProviderRegistry
from streams.memory.rules.routing import long_memory_enabled, route
from streams.metrics import DEDUP_DROPPED, ERASURE_SKIPPED
from streams.wire.records import SessionClosed

log = logging.getLogger(__name__)
EPISODE_IMPORTANCE = 0.3


@dataclass(frozen=True)
class PassageCut:
    """How an assistant's long message is cut (:func:`.rules.passages.passages`): into
    passages of about ``target_chars``, none longer than ``max_chars``, at most
    ``per_message``."""

    target_chars: int = 600
    max_chars: int = 1000
    per_message: int = 64


@dataclass(frozen=True)
class PipelineConfig:
    default_long_memory: bool = True
    max_messages: int = 2000  # one run's share of a session: messages ...
    max_bytes: int = 4 * 1024 * 1024  # ... and bytes of their text
    close_slack_s: float = 2.0
    context_messages: int = 20
    dedup_jaccard: float = 0.7
    dedup_levenshtein: float = 0.8
    dedup_short_len: int = 50
    episode_max_chars: int = 2000
    passages: PassageCut = PassageCut()
    late_window_days: float = 7.0  # a late session end takes messages stored this recently
    summarize: bool = True  # bring the conversation's summary up to date after a run

    @property
    def size(self) -> PartBound:
        return PartBound(self.max_messages, self.max_bytes)


@dataclass
class Outcome:
    """What one run did: ``done``, ``duplicate`` (done before), ``nothing_new``,
    ``skipped`` (long memory off) or ``erased`` (an erasure covers the session);
    ``next``: the closing event of the session's next part, to be sent."""

    outcome: str
    provider: str
    judge: str | None = None
    messages: int = 0
    candidates: int = 0
    stats: WriteStats | None = None
    summary: str | None = None
    next: SessionClosed | None = None


def episodes_of(messages: Sequence[SessionMessage], max_chars: int,
                cut: PassageCut | None = None) -> list[PlannedCandidate]:
    """Each new user or assistant message as episodic memories of the user's cube: a
    user's message whole (cut to ``max_chars``), an assistant's longer than
    ``cut.max_chars`` as its passages (:mod:`.rules.passages`), each with its span."""
    out = []
    for m in messages:
        text = m.content.strip()
        if m.role not in CHAT_ROLES or not text:
            continue
        speaker = m.name or m.role.capitalize()
        parts: list[tuple[str, tuple[int, int] | None]] = [(text, None)]
        if cut is not None and m.role == "assistant" and len(text) > cut.max_chars:
            parts = [(p.text, (p.start, p.end)) for p in passages(
                m.content, target=cut.target_chars, limit=cut.max_chars,
                max_passages=cut.per_message)]
        for body, span in parts:
            out.append(PlannedCandidate(USER_CUBE, MemoryCandidate(
                content=clip_text(f"{speaker}: {body}", max_chars), type="text", scope="user",
                importance=EPISODE_IMPORTANCE, source_event_ids=(m.event_id,),
                event_time=m.created_at, kind="episode", role=m.role, span=span), episode=True,
                user_id=m.user_id or None))
    return out



class ConsolidationPipeline:
    def __init__(self, ledger: Ledger, runs: Runs, judge: MemoryJudge, writer: MemoryWriter,
                 summarizer: Summarizer, registry: ProviderRegistry, models: ModelFactory,
                 configs: AgentConfigs,
                 config: PipelineConfig, clock: Callable[[], float] = time.time, *,
                 erasures: ErasureIndex | None = None,
                 refresh_erasures: Callable[[], Awaitable[None]] | None = None,
                 cube_quota: CubeQuota | None = None,
                 budget: ModelBudget | None = None,
                 screening: Screening | None = None,
                 turn: Callable[[str, str, float], Awaitable[None]] | None = None) -> None:
        """``turn``: awaited before each stage of a run, with its tenant and the
        messages it claimed (once, before it is judged; else 0): the worker's queries go
        first, and a tenant with most of the background gives way under load
        (:mod:`streams.worker.foreground`)."""
        self.ledger = ledger
        self.runs = runs
        self.judge = judge
        self.writer = writer
        self.summarizer = summarizer
        self.registry = registry
        self.models = models
        self.configs = configs
        self.config = config
        self.clock = clock
        self.erasures = erasures if erasures is not None else ErasureIndex()
        self.refresh_erasures = refresh_erasures
        self.cube_quota = cube_quota
        self.budget = budget
        self.screening = screening
        self.turn = turn

    async def _turn(self, tenant: str, messages: int = 0) -> None:
        if self.turn is not None:
            await self.turn("consolidation", tenant, messages)

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    async def run(self, closed: SessionClosed) -> Outcome:
        run = await self.runs.get(closed.closed_id)
        if run is not None and run.status == "done":
            return Outcome("duplicate", run.provider, next=await self._next_part(closed, run))
        event = closed
        if await self._erased(closed):
            # a user erased from a conversation others spoke in: the others' messages
            # are consolidated, as one of theirs
            other = await self.ledger.other_speaker(closed.tenant_id, closed.conversation_id,
                                                    closed.user_id)
            if other is None or self._conversation_erased(closed):
                ERASURE_SKIPPED.labels("consolidation").inc()
                return Outcome("erased", run.provider if run else "none")
            closed = closed.model_copy(update={"user_id": other})
        agent = self.configs.get(closed.tenant_id, closed.agent_id)
        await self._turn(closed.tenant_id)
        if run is None:
            with tracing.span("consolidation claim"):
                run = await self._claim(closed, route(agent), long_memory_enabled(
                    agent, default_for_unknown=self.config.default_long_memory))
                tracing.annotate({"memstream.messages": run.message_count})
        out = Outcome("skipped", run.provider, messages=run.message_count)
        caller = ModelCaller(run.tenant_id, run.agent_id, ModelTally())
        with_model = self._admitted(run)
        if run.long_memory:
            handle = self.registry.get(run.provider)
            model = self.models.for_agent(agent.model if agent else None) if with_model else None
            if run.status == "claimed":
                await self._turn(run.tenant_id, run.message_count)
                with tracing.span("consolidation judge") as span:
                    await self._judge(run, closed, handle, model, out, caller)
                    span.set_attribute("memstream.judge", out.judge or "")
            rows = await self._without_erased(run, closed,
                                              await self.runs.candidates(run.closed_id))
            out.candidates = len(rows)
            await self._turn(run.tenant_id)
            with tracing.span("memory write", {"memstream.provider": run.provider,
                                               "memstream.candidates": len(rows)}):
                out.stats = await self.writer.write(
                    run, handle, model, rows,
                    erased=lambda users: self._erased_users(closed, users), caller=caller)
            out.judge = out.judge or (await self.runs.get(run.closed_id) or run).judge
            out.outcome = "done" if rows or run.message_count else "nothing_new"
        if await self._erased(closed):  # erased meanwhile: nothing more written, no summary
            ERASURE_SKIPPED.labels("consolidation").inc()
            return Outcome("erased", run.provider)
        if self.config.summarize:
            await self._turn(run.tenant_id)
            with tracing.span("consolidation summary"):
                out.summary = await self.summarizer.maybe_summarize(
                    run.tenant_id, run.conversation_id,
                    self.models.for_agent(None) if with_model else None, caller=caller,
                    screen=self._summary_screen(run))
        await self.runs.finish(run.closed_id, self.now())
        if self.budget is not None and caller.tally is not None:
            self.budget.per_message(run.tenant_id, caller.tally, run.message_count)
        out.next = await self._next_part(event, run)
        return out

    def _admitted(self, run: Run) -> bool:
        """Whether the run may call the model: always, but for a tenant over its daily
        token budget when a model is configured and the run would use it (its long
        memory on, or summaries made); a refusal is counted, once per attempt."""
        if self.budget is None or not self.models.configured:
            return True
        if not (run.long_memory or self.config.summarize):
            return True  # no model call to refuse: no fallback to count
        return self.budget.admit(run.tenant_id)

    async def _next_part(self, closed: SessionClosed, run: Run) -> SessionClosed | None:
        """The closing event of the part after ``run``, when the session has more and
        that part's run was not created yet (then its own event carries on)."""
        if not run.more:
            return None
        following = closed.model_copy(update={
            "closed_id": next_id(closed.closed_id, closed.part), "part": closed.part + 1})
        if await self.runs.get(following.closed_id) is not None:
            return None
        return following

    async def _erased(self, closed: SessionClosed) -> bool:
        """Whether an erasure covers the session of its closing user (read afresh: an
        erasure recorded on another worker a moment ago counts)."""
        return bool(await self._erased_users(closed, (closed.user_id,)))

    async def _erased_users(self, closed: SessionClosed,
                            users: Iterable[str]) -> set[str]:
        """Which of ``users`` an erasure covers in the session (read afresh): every one
        when the conversation or the tenant is erased."""
        if self.refresh_erasures is not None:
            await self.refresh_erasures()
        last = naive_utc(closed.last_activity)
        if self._conversation_erased(closed):
            return set(users)
        return {u for u in users if self.erasures.session_covered(
            closed.tenant_id, u, closed.conversation_id, last) is not None}

    async def _without_erased(self, run: Run, closed: SessionClosed,
                              rows: Sequence[CandidateRow]) -> list[CandidateRow]:
        """``rows`` but those of users an erasure covers, dropped from the run: an
        erasure recorded while they were judged or saved may have deleted the run's
        rows before they were stored."""
        gone = await self._erased_users(closed, {r.owner(run) for r in rows})
        doomed = [r.seq for r in rows if r.owner(run) in gone]
        if doomed:
            await self.runs.drop(run.closed_id, doomed)
            ERASURE_SKIPPED.labels("consolidation").inc()
        return [r for r in rows if r.owner(run) not in gone]

    def _conversation_erased(self, closed: SessionClosed) -> bool:
        """Whether the conversation itself (or its tenant) is erased, not only a user."""
        return self.erasures.session_covered(
            closed.tenant_id, "", closed.conversation_id,
            naive_utc(closed.last_activity)) is not None

    async def _claim(self, closed: SessionClosed, provider: str, long_memory: bool) -> Run:
        now = self.now()
        bound = naive_utc(closed.closed_at) + timedelta(seconds=self.config.close_slack_s)
        await self.ledger.claim_run(
            Run(closed.closed_id, closed.tenant_id, closed.conversation_id, closed.user_id,
                closed.agent_id, provider, long_memory),
            session_seq=closed.session_seq, bound=bound, size=self.config.size,
            late_since=(naive_utc(now) - timedelta(days=self.config.late_window_days)
                        if closed.trigger == "late" else None),
            now=now, until_event_id=closed.last_event_id,
            previous=previous_id(closed.closed_id, closed.part))
        run = await self.runs.get(closed.closed_id)
        assert run is not None
        return run

    async def _judge(self, run: Run, closed: SessionClosed, handle: ProviderHandle,
                     model: ChatCompleter | None, out: Outcome, caller: ModelCaller) -> None:
        """Judge the claimed messages and store the candidates, but those of users an
        erasure covers by now (the judge may have taken long)."""
        messages = await self.ledger.claimed_messages(run.tenant_id, run.closed_id)
        judge, planned = await self.candidates(run, messages, handle, model, caller=caller)
        gone = await self._erased_users(closed, {p.user_id or run.user_id for p in planned})
        planned = [p for p in planned if (p.user_id or run.user_id) not in gone]
        saved = await self.runs.save_judgement(run.closed_id, judge, planned, self.now())
        if saved:
            out.judge = judge
        else:
            log.info("run %s was judged by another attempt; using its candidates",
                     run.closed_id)

    async def candidates(self, run: Run, messages: Sequence[SessionMessage],
                         handle: ProviderHandle, model: ChatCompleter | None, *,
                         caller: ModelCaller | None = None,
                         ) -> tuple[str, list[PlannedCandidate]]:
        """What the judge makes of a run's messages (deduplicated, with episodes,
        each bound for its cube and user), and which judge made it; writes nothing."""
        chat = [m for m in messages if m.role in CHAT_ROLES and m.content.strip()]
        if not chat:
            return "none", []
        context = await self.ledger.context_before(
            run.tenant_id, run.conversation_id, chat[0].id, self.config.context_messages)
        judged = await self.judge.judge(
            model, [m.source(new=False) for m in context if m.role in CHAT_ROLES],
            [m.source(new=True) for m in chat],
            caller=caller or ModelCaller(run.tenant_id, run.agent_id))
        cfg = self.config
        authors = {m.event_id: Author(m.role, m.user_id) for m in chat if m.user_id}

        def owner(c: MemoryCandidate) -> str:
            return attributed_user(c.source_event_ids, authors, run.user_id)

        deduped = dedup_candidates(  # a group chat's speakers keep their own facts
            judged.candidates, jaccard=cfg.dedup_jaccard, levenshtein=cfg.dedup_levenshtein,
            short_len=cfg.dedup_short_len,
            owner=lambda c: owner(c) if c.scope == "user" else "")
        for d in deduped.dropped:
            DEDUP_DROPPED.labels(d.rule).inc()
        kept = deduped.kept
        episodes = (episodes_of(chat, cfg.episode_max_chars, cfg.passages) if handle.episodes
                    else [])
        if episodes:
            covered = drop_covered_by_episodes(kept, [p.candidate for p in episodes])
            for d in covered.dropped:
                DEDUP_DROPPED.labels(d.rule).inc()
            kept = covered.kept
        planned = [PlannedCandidate(cube_for(c.scope, run.agent_id), c, user_id=owner(c))
                   for c in kept]
        planned = [p for p in planned + episodes if not self._erased_memory(run, p)]
        if self.screening is not None:  # before anything is stored, the candidate rows too
            with tracing.span("consolidation screen"):
                planned = await self.screening.candidates(
                    run.tenant_id, planned, self._policy(run),
                    said=() if episodes else [m.content for m in chat])
        if self.cube_quota is not None:  # episodes of a cube at its quota dropped
            planned = await self.cube_quota.keep(run, planned)
        return judged.kind, planned

    def _policy(self, run: Run) -> Policy:
        """The run's tenant's and agent's sensitive-content policy (read afresh)."""
        return self.policy_of(run.tenant_id, run.agent_id)

    def policy_of(self, tenant_id: str, agent_id: str) -> Policy:
        """The tenant's and agent's sensitive-content policy now (screening is on)."""
        assert self.screening is not None
        agent = self.configs.get(tenant_id, agent_id)
        return self.screening.policy(tenant_id, agent_id, agent.sensitive if agent else ())

    def _summary_screen(self, run: Run
                        ) -> Callable[[str, Sequence[str]], Awaitable[str]] | None:
        """How the run's summary is screened before it is stored (None: not at all)."""
        screening = self.screening
        if screening is None:
            return None
        policy = self._policy(run)
        return lambda text, said: screening.summary(run.tenant_id, text, policy, said)

    def _erased_memory(self, run: Run, p: PlannedCandidate) -> bool:
        """A candidate that would bring an erased memory back (its cube, user and kind,
        judged from that memory's source events; an episode, of that memory's part)."""
        c = p.candidate
        return self.erasures.erased_memory(run.tenant_id, p.cube, p.user_id or run.user_id,
                                           c.source_event_ids, c.kind, c.span) is not None
