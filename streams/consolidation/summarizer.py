"""Summarizer: the conversation summary, when enough messages are not covered.

A summary is due when at least ``threshold`` messages of the conversation lie
above ``conversation_summary.covered_until_id``. It is built from the newest
``max_messages`` messages: by the model when one is configured (the previous
summary plus the messages it does not cover), else by
:func:`~streams.consolidation.rules.summary.extractive_summary`; a failing model falls back
to the extractive summary. The text is kept within ``budget_tokens``.

The summary is upserted in the database (never moving ``covered_until_id``
backwards, so a stale retry cannot replace a newer summary) and cached in
Redis for the summary TTL as ``{"text", "covered_until_id"}``, the document the
Session read path reads. Redis failing changes nothing but the cache.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.engine import upsert
from streams.adapters.db.ledger import SessionMessage
from streams.adapters.db.schema.conversation import conversation_message, conversation_summary
from streams.adapters.redis.conversation_cache import ConversationCache
from streams.clock import aware_utc, naive_utc
from streams.consolidation.judge import ChatCompleter
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
_m, _s = conversation_message.c, conversation_summary.c


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
    def __init__(self, engine: AsyncEngine, cache: ConversationCache,
                 count_tokens: CountTokens, *, threshold: int = 20,
                 budget_tokens: int = 2000, max_messages: int = 400,
                 clock: Callable[[], float] = time.time) -> None:
        self.engine = engine
        self.cache = cache
        self.count_tokens = count_tokens
        self.threshold = threshold
        self.budget_tokens = budget_tokens
        self.max_messages = max_messages
        self.clock = clock
        self._upsert = upsert(engine, conversation_summary, ["tenant_id", "conversation_id"],
                              ["summary", "covered_until_id", "covered_count", "token_count",
                               "updated_at"])

    async def maybe_summarize(self, tenant_id: str, conversation_id: str,
                              model: ChatCompleter | None) -> str | None:
        """Summarise when due; returns the generator used, or None when not due."""
        conv = (_m.tenant_id == tenant_id, _m.conversation_id == conversation_id)
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(_s.summary, _s.covered_until_id).where(
                _s.tenant_id == tenant_id, _s.conversation_id == conversation_id))).first()
            covered = int(row.covered_until_id) if row else 0
            uncovered = int((await conn.execute(
                select(func.count()).where(*conv, _m.id > covered))).scalar_one())
            if not needs_summary(uncovered, self.threshold):
                return None
            rows = (await conn.execute(
                select(_m.id, _m.event_id, _m.role, _m.name, _m.content, _m.created_at)
                .where(*conv).order_by(_m.id.desc()).limit(self.max_messages))).all()
            messages = [SessionMessage(int(r.id), r.event_id, r.role, r.content,
                                       aware_utc(r.created_at), r.name)
                        for r in reversed(rows)]
            until = messages[-1].id
            total = int((await conn.execute(
                select(func.count()).where(*conv, _m.id <= until))).scalar_one())
        previous = row.summary if row else None
        text, generator = await self._generate(model, previous, messages, covered)
        await self._store(tenant_id, conversation_id, text, until, total)
        SUMMARIES.labels(generator).inc()
        return generator

    async def _generate(self, model: ChatCompleter | None, previous: str | None,
                        messages: list[SessionMessage], covered: int) -> tuple[str, str]:
        if model is not None:
            fresh = [m.source(new=True) for m in messages if m.id > covered]
            try:
                answer = await model.complete(
                    build_summary_messages(previous, fresh, budget_tokens=self.budget_tokens),
                    purpose="summary", max_tokens=self.budget_tokens)
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
        now = naive_utc(datetime.fromtimestamp(self.clock(), UTC))
        doc: dict[str, Any] = {
            "tenant_id": tenant_id, "conversation_id": conversation_id, "summary": text,
            "covered_until_id": until, "covered_count": total,
            "token_count": self.count_tokens(text), "updated_at": now}
        conv = (_m.tenant_id == tenant_id, _m.conversation_id == conversation_id)
        async with self.engine.begin() as conn:
            current = (await conn.execute(select(_s.covered_until_id).where(
                _s.tenant_id == tenant_id, _s.conversation_id == conversation_id)
                .with_for_update())).scalar_one_or_none()
            if current is not None and int(current) >= until:
                return
            # messages summarised that are gone now were erased while the summary was
            # made: it is not stored (a locking read, so a delete is seen, or waited for)
            still = (await conn.execute(select(func.count()).select_from(conversation_message)
                                        .where(*conv, _m.id <= until).with_for_update())
                     ).scalar_one()
            if int(still) != total:
                log.info("summary of %s/%s dropped: its messages changed meanwhile",
                         tenant_id, conversation_id)
                return
            await conn.execute(self._upsert, doc)
        if not self.cache.enabled:
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
        async with self.engine.connect() as conn:
            kept = (await conn.execute(select(_s.covered_until_id).where(
                _s.tenant_id == tenant_id, _s.conversation_id == conversation_id))).first()
        if kept is None:
            await self.cache.forget([(tenant_id, conversation_id)])
