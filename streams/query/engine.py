"""QueryEngine: one memory lookup, from request to reply.

The Session window and the long-term search run in parallel, each under the
request's deadline; either failing leaves the other's part in the reply plus a
warning. Long-term rules (DESIGN §3):

* skipped — not an error — when the agent's long memory is off or no model is
  bound (agents with no configuration use the deployment default);
* routed to MemOS / Mem0 / built-in exactly as consolidation routes writes;
  a failing provider is reported, never swapped for another;
* readable cubes ``user_profile`` and ``agent_{agentId}``, each ranked by the
  provider on its own (scores relative to the cube's own best hit, so the
  user's many memories never push the agent's lessons out), preferences with
  ``pref_top_k``, ``relativity``, MMR de-duplication by the provider;
* a query that names nothing to look for ("What do you know about me?",
  :mod:`.rules.generic`) gets each cube's strongest memories instead
  (:mod:`streams.memory.rules.strength`; ``long_term.ranked_by`` says so);
* a query naming a date ("on May 3, 2023", "in June") lifts, in each cube, the
  memories dated in it (:mod:`streams.memory.rules.dates`; by default they come
  first);
* a query asking how something went over time ("in what order did I…",
  "summarize how my … progressed", :mod:`.rules.timeline`) gets each memory as
  an outline's line, the sentence that matches (``long_term.outline`` says so), so the
  budget reaches many sessions instead of a few whole;
* results under ``min_score`` dropped (not the strongest memories: their score
  is no relevance), each cut to 1,000 characters, a fact and the episode it
  was judged from never both kept (:mod:`.rules.same_source`), sorted by
  score; ``top_k`` of them listed in ``memories``; a larger candidate pool
  feeds the token budget (``user_profile`` at most 60 %, whole lines, each
  with its event date).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from streams import tracing
from streams.kept_tasks import KeptTasks
from streams.memory.agent_configs import AgentConfigs
from streams.memory.model import StoredMemory, readable_cubes
from streams.memory.provider import ProviderError, Scope, SearchRequest
from streams.memory.registry import ProviderRegistry
from streams.memory.rules.dates import DATE_LIFT, DATE_SLACK_DAYS, lift_dated, named_periods
from streams.memory.rules.routing import AgentConfig, long_memory_enabled, route
from streams.memory.rules.strength import strongest_first
from streams.metrics import (
    QUERY_BUDGET_TOKENS,
    QUERY_MEMORIES,
    QUERY_STAGE_LATENCY,
)
from streams.query.ports import WindowScreen
from streams.query.rules.budget import filter_and_trim, pack_budget
from streams.query.rules.generic import content_terms, is_generic
from streams.query.rules.query_text import build_query_text
from streams.query.rules.same_source import COVERS, fold_same_source
from streams.query.rules.timeline import (
    OUTLINE_CHARS,
    asks_over_time,
    outlined,
    topic_terms,
)
from streams.query.rules.window_access import may_read_window
from streams.redaction import error_text
from streams.session.reader import SessionReader, SessionWindow
from streams.tokens import CountTokens
from streams.wire.query import (
    BudgetInfo,
    LongTermInfo,
    MemoryQuery,
    MemoryReply,
    ReplyMemory,
    Warning_,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


class SearchRecorder(Protocol):
    def record_search(self, *, tenant_id: str, user_id: str, agent_id: str,
                      provider: str | None, keyword_only: bool, latency_ms: float,
                      results: int, outcome: str) -> None: ...


@dataclass(frozen=True)
class QueryConfig:
    candidate_pool: int = 150
    relativity: float = 0.3
    min_score: float = 0.3
    max_memory_chars: int = 1000
    user_share: float = 0.6
    pref_top_k: int = 6
    default_long_memory: bool = True
    date_lift: float = DATE_LIFT
    date_lift_slack_days: int = DATE_SLACK_DAYS
    outline_chars: int = OUTLINE_CHARS


@dataclass
class _LongTerm:
    memories: list[StoredMemory]
    info: LongTermInfo


def long_memory_off_reason(config: AgentConfig | None, default_on: bool) -> str | None:
    if long_memory_enabled(config, default_for_unknown=default_on):
        return None
    if config is None:
        return "long memory is off for agents without configuration"
    if not config.open_long_memory:
        return "open_long_memory is off for this agent"
    return "no model is bound to this agent"


def reply_memory(m: StoredMemory) -> ReplyMemory:
    covers = m.metadata.get(COVERS)
    return ReplyMemory(
        id=m.id, content=m.content, score=round(m.score, 4), cube=m.cube, type=m.type, kind=m.kind,
        event_time=m.event_time.isoformat() if m.event_time else None,
        source_event_ids=list(m.source_event_ids),
        source_span=list(span) if isinstance(span := m.metadata.get("span"), tuple) else None,
        covers=[str(i) for i in covers] if isinstance(covers, list) else [],
    )


def by_cube(found: list[StoredMemory]) -> list[list[StoredMemory]]:
    """``found`` split by cube, each in its order."""
    out: dict[str, list[StoredMemory]] = {}
    for m in found:
        out.setdefault(m.cube, []).append(m)
    return list(out.values())


class QueryEngine:
    def __init__(
        self,
        config: QueryConfig,
        reader: SessionReader,
        agent_configs: AgentConfigs,
        providers: ProviderRegistry,
        count_tokens: CountTokens,
        *,
        search_log: SearchRecorder | None = None,
        window_screen: WindowScreen | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        """``window_screen``: how the Session window is screened for sensitive content
        before it is returned (None: it is returned as stored)."""
        self.config = config
        self.window_screen = window_screen
        self.reader = reader
        self.agent_configs = agent_configs
        self.providers = providers
        self.count_tokens = count_tokens
        self.search_log = search_log
        self.clock = clock
        self._unwinding = KeptTasks("a query part unwinding")  # cancelled, out of time

    async def _timed(self, stage: str, work: Coroutine[Any, Any, T], timeout_s: float) -> T:
        """``work``'s result, or TimeoutError after ``timeout_s``. A part out of time is
        cancelled and left to unwind (a rollback, a connection closed) on its own: the
        reply does not wait for it. A request cancelled waits for its parts' unwinding."""
        start = self.clock()
        with tracing.span(f"query {stage}") as span:
            part = asyncio.ensure_future(work)  # in the span: its spans are the stage's
            try:
                await asyncio.wait({part}, timeout=timeout_s)
            except asyncio.CancelledError:
                self._leave_unwinding(part)
                await asyncio.wait({part})
                raise
            finally:
                QUERY_STAGE_LATENCY.labels(stage).observe(self.clock() - start)
            if part.done():
                return part.result()
            tracing.failed(span, "timed out")
            self._leave_unwinding(part)
            raise TimeoutError(f"{stage} took longer than {timeout_s:.3f} s")

    def _leave_unwinding(self, part: asyncio.Future[Any]) -> None:
        """``part`` cancelled, and kept until it has unwound (its failure logged)."""
        part.cancel()
        self._unwinding.keep(part)

    async def _short_term(self, q: MemoryQuery) -> SessionWindow | None:
        if not (q.options.include_short_term and q.conversation_id):
            return None
        screen = self.window_screen
        window = await self.reader.window(
            q.tenant_id, q.conversation_id, last_n=q.options.last_n,
            screen=None if screen is None else (
                lambda docs, summary: screen.screen(q.tenant_id, q.agent_id, docs, summary)))
        if not may_read_window(window.speakers, q.user_id):
            raise WindowWithheld(q.conversation_id)
        return window

    async def _long_term(self, q: MemoryQuery) -> _LongTerm:
        config = self.agent_configs.get(q.tenant_id, q.agent_id)
        keyword_only = q.options.just_keyword_search
        reason = long_memory_off_reason(config, self.config.default_long_memory)
        if reason is not None:
            return _LongTerm([], LongTermInfo(skipped=reason, keyword_only=keyword_only))
        handle = self.providers.get(route(config))
        text = build_query_text(q.message, q.context)
        generic = is_generic(text)
        outline = (not generic and self.config.outline_chars > 0
                   and asks_over_time(q.message))
        request = SearchRequest(
            query=text,
            cubes=readable_cubes(q.agent_id),
            top_k=max(q.options.top_k, self.config.candidate_pool),
            relativity=self.config.relativity,
            keyword_only=keyword_only,
            include_preference=True,
            pref_top_k=self.config.pref_top_k,
            dedup=True,
            order="strength" if generic else "relevance",
        )
        scope = Scope(q.tenant_id, q.user_id, q.agent_id)
        start = self.clock()
        outcome = "error"
        found: list[list[StoredMemory]] = []
        try:
            with tracing.span("memory search", {"memstream.provider": handle.route,
                                                "memstream.cubes": len(request.cubes),
                                                "memstream.keyword_only": keyword_only}):
                found = by_cube(await handle.provider.search(scope, request))
                tracing.annotate({"memstream.candidates": sum(len(f) for f in found)})
            outcome = "ok"
        finally:
            if self.search_log is not None:
                self.search_log.record_search(
                    tenant_id=q.tenant_id, user_id=q.user_id, agent_id=q.agent_id,
                    provider=handle.route, keyword_only=keyword_only,
                    latency_ms=(self.clock() - start) * 1000,
                    results=sum(len(f) for f in found), outcome=outcome)
        periods = [] if generic else named_periods(text)
        kept: list[StoredMemory] = []
        for cube in found:
            if periods:
                cube = lift_dated(cube, periods, weight=self.config.date_lift,
                                  slack_days=self.config.date_lift_slack_days)
            kept += filter_and_trim(strongest_first(cube) if generic else cube,
                                    min_score=0.0 if generic else self.config.min_score,
                                    max_chars=self.config.max_memory_chars)
        if outline:
            kept = outlined(kept, self.config.outline_chars,
                            topic_terms(content_terms(q.message)))
        return _LongTerm(fold_same_source(kept), LongTermInfo(
            provider=handle.route, keyword_only=keyword_only,
            candidates=sum(len(f) for f in found),
            ranked_by="strength" if generic else "relevance", outline=outline))

    async def answer(self, q: MemoryQuery, budget_s: float | None = None) -> MemoryReply:
        """``budget_s``: how long each part may take (what is left of the caller's wait;
        default the request's ``timeout_ms``); a part taking longer is a warning."""
        start = self.clock()
        timeout = q.options.timeout_ms / 1000 if budget_s is None else budget_s
        short, long = await asyncio.gather(
            self._timed("short_term", self._short_term(q), timeout),
            self._timed("long_term", self._long_term(q), timeout),
            return_exceptions=True,
        )
        reply = MemoryReply(request_id=q.request_id, tenant_id=q.tenant_id, user_id=q.user_id,
                            agent_id=q.agent_id, conversation_id=q.conversation_id)
        if isinstance(short, WindowWithheld):
            reply.warnings.append(Warning_(
                code="short_term_withheld",
                message=f"user {q.user_id!r} does not speak in conversation {short}"))
        elif isinstance(short, BaseException):
            reply.warnings.append(_warning("short_term_failed", short))
        elif short is not None:
            reply.short_term = short.to_dict()
            reply.summary = short.summary
            if short.unverified:
                reply.warnings.append(Warning_(code="short_term_unverified", message=(
                    "the Session window was read from Redis without the database's word "
                    "that the list missed no write (no answer in time)")))
        if isinstance(long, BaseException):
            reply.warnings.append(_warning("long_term_failed", long))
            reply.long_term = LongTermInfo(keyword_only=q.options.just_keyword_search)
        else:
            self._fill_long_term(reply, long, q)
        reply.latency_ms = round((self.clock() - start) * 1000, 3)
        return reply

    def _fill_long_term(self, reply: MemoryReply, long: _LongTerm, q: MemoryQuery) -> None:
        reply.long_term = long.info
        if long.info.skipped is not None:
            return
        budget_start = self.clock()
        with tracing.span("query budget") as span:
            packed = pack_budget(long.memories,
                                 budget_tokens=q.options.long_memory_token_budget,
                                 user_share=self.config.user_share, count=self.count_tokens)
            span.set_attribute("memstream.tokens_used", packed.tokens_used)
        QUERY_STAGE_LATENCY.labels("budget").observe(self.clock() - budget_start)
        reply.user_profile = packed.user_profile
        reply.agent_memory = packed.agent_memory
        reply.memories = [reply_memory(m) for m in long.memories[: q.options.top_k]]
        reply.budget = BudgetInfo(
            tokens=q.options.long_memory_token_budget,
            tokens_used=packed.tokens_used,
            memory_ids=[m.id for m in packed.included],
            source_event_ids=[s for m in packed.included for s in m.source_event_ids],
        )
        QUERY_MEMORIES.observe(len(reply.memories))
        QUERY_BUDGET_TOKENS.observe(packed.tokens_used)


class WindowWithheld(Exception):
    """The query's user does not speak in the conversation it names."""


def _warning(code: str, exc: BaseException) -> Warning_:
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return Warning_(code=code, message="timed out")
    if isinstance(exc, ProviderError):
        return Warning_(code=code, message=error_text(exc))
    log.warning("query part failed: %s", code, exc_info=exc)
    return Warning_(code=code, message=type(exc).__name__)
