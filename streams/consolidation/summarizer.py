"""Summarizer: the conversation summary, when enough messages are not covered.

A summary is due when at least ``threshold`` messages of the conversation lie
above ``conversation_summary.covered_until_id``. It is built from the newest
``max_messages`` messages: by the model when one is configured (the previous
summary plus the messages it does not cover), else by
:func:`~streams.consolidation.rules.summary.extractive_summary`; a failing model falls back
to the extractive summary. The text is kept within ``budget_tokens``.

The summary is stored (:class:`~.ports.Summaries`: never moving
``covered_until_id`` backwards, so a stale retry cannot replace a newer summary)
and cached (:class:`~.ports.SummaryCache`, Redis) for the summary TTL as
``{"text", "covered_until_id"}``, the document the Session read path reads. Redis
failing changes nothing but the cache.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

from streams.consolidation.model import SessionMessage
from streams.consolidation.ports import ChatCompleter, ModelCaller, Summaries, SummaryCache
from streams.consolidation.rules.summary import (
    build_summary_messages,
    extractive_summary,
    needs_summary,
)
from streams.memory.provider import ProviderError
from streams.metrics import SUMMARIES
from streams.stores import CacheUnavailable
from streams.tokens import CountTokens

log = logging.getLogger(__name__)


def clip_lines(text: str, budget_tokens: int, count: CountTokens) -> str:
    """``text`` cut at whole lines to fit ``budget_tokens``."""
    kept: list[str] = []
    used = 0
    for line in text.strip().splitlines():
        cost = count(line) + 1
        if used + cost > budget_tokens:
            break
        kept.append(line)
        used += cost
    return "\n".join(kept)


class Summarizer:
    def __init__(self, summaries: Summaries, cache: SummaryCache,
                 count_tokens: CountTokens, *, threshold: int = 20,
                 budget_tokens: int = 2000, max_messages: int = 400,
                 clock: Callable[[], float] = time.time) -> None:
        self.summaries = summaries
        self.cache = cache
        self.count_tokens = count_tokens
        self.threshold = threshold
        self.budget_tokens = budget_tokens
        self.max_messages = max_messages
        self.clock = clock

    async def maybe_summarize(self, tenant_id: str, conversation_id: str,
                              model: ChatCompleter | None, *,
                              caller: ModelCaller | None = None,
                              screen: Callable[[str, Sequence[str]], Awaitable[str]] | None
                              = None,
                              ) -> str | None:
        """Summarise when due; returns the generator used, or None when not due. The
        model's usage is counted for ``caller`` (by default the tenant, no agent);
        ``screen`` makes the text what is stored (sensitive content masked), given the
        messages a model summarised (none for an extractive summary: its lines are
        the messages' own words)."""
        work = await self.summaries.due(
            tenant_id, conversation_id, newest=self.max_messages,
            due=lambda uncovered: needs_summary(uncovered, self.threshold))
        if work is None:
            return None
        text, generator = await self._generate(model, work.previous, work.messages,
                                               work.covered_until,
                                               caller or ModelCaller(tenant_id, ""))
        if screen is not None:
            said = ([m.content for m in work.messages if m.id > work.covered_until]
                    if generator == "model" else [])
            text = await screen(text, said)
        await self._store(tenant_id, conversation_id, text, work.until, work.total)
        SUMMARIES.labels(generator).inc()
        return generator

    async def _generate(self, model: ChatCompleter | None, previous: str | None,
                        messages: list[SessionMessage], covered: int,
                        caller: ModelCaller) -> tuple[str, str]:
        if model is not None:
            fresh = [m.source(new=True) for m in messages if m.id > covered]
            try:
                answer = await model.complete(
                    build_summary_messages(previous, fresh, budget_tokens=self.budget_tokens),
                    purpose="summary", caller=caller, max_tokens=self.budget_tokens)
                text = clip_lines(answer.text, self.budget_tokens, self.count_tokens)
                if text:
                    return text, "model"
            except ProviderError as exc:
                log.warning("summary model failed (%s); extractive summary instead", exc)
        text = extractive_summary([m.source(new=True) for m in messages],
                                  budget_tokens=self.budget_tokens, count=self.count_tokens)
        return text, "extractive"

    async def _store(self, tenant_id: str, conversation_id: str, text: str, until: int,
                     total: int) -> None:
        now = datetime.fromtimestamp(self.clock(), UTC)
        stored = await self.summaries.store(tenant_id, conversation_id, text, until=until,
                                            total=total, tokens=self.count_tokens(text), now=now)
        if stored == "changed":
            log.info("summary of %s/%s dropped: its messages changed meanwhile",
                     tenant_id, conversation_id)
        if stored != "stored" or not self.cache.enabled:
            return
        try:
            await self.cache.set_summary(tenant_id, conversation_id,
                                         {"text": text, "covered_until_id": until})
            await self._uncache_if_erased(tenant_id, conversation_id)
        except CacheUnavailable as exc:
            log.warning("summary of %s/%s not cached: %s", tenant_id, conversation_id, exc)

    async def _uncache_if_erased(self, tenant_id: str, conversation_id: str) -> None:
        """An erasure that deleted the stored summary before it was cached deletes the
        cached copy before that too: the copy goes again here."""
        if not await self.summaries.kept(tenant_id, conversation_id):
            await self.cache.forget([(tenant_id, conversation_id)])
