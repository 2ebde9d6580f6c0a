"""SessionReader: the Session-layer read path.

Redis first; on a miss or a Redis error the database, then the cache is
rebuilt. Beside the Redis read, the conversation's stale-history mark is looked
up (:mod:`streams.session.stale`): a marked list is never served — the database is read
and the list rebuilt from it, which clears the mark. ``last_n`` bounds how many
of the newest messages are considered, then the window rules of
:mod:`streams.session.rules.window` apply. The summary comes from Redis (cached for an
hour) or the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from streams.metrics import CACHE_READS
from streams.session.ports import HotCopy, MessageLog
from streams.session.rules.window import Window, build_window
from streams.session.stale import Lookup, StaleHistories
from streams.stores import CacheUnavailable
from streams.tokens import CountTokens

log = logging.getLogger(__name__)

Source = Literal["cache", "database"]
Read = Literal["cache", "unverified", "database"]
"""Where a read's messages came from; ``unverified``: Redis, while the database did not
say in time whether the list missed a write (``StaleHistories.lookup``)."""


Docs = list[dict[str, Any]]
Screen = Callable[[Docs, str | None], Awaitable[tuple[Docs, str | None]]]
"""What a window's messages and summary become before the window is built (the
Session window's sensitive-content screening): messages may be changed or left out."""


@dataclass
class SessionWindow:
    tenant_id: str
    conversation_id: str
    messages: list[dict[str, Any]]
    system: list[dict[str, Any]] = field(default_factory=list)
    tool: list[dict[str, Any]] = field(default_factory=list)
    summary: str | None = None
    tokens: int = 0
    truncated: bool = False
    source: Source = "database"
    considered: int = 0
    # the users speaking in the messages considered (not on the wire)
    speakers: list[str] = field(default_factory=list)
    # read from Redis without the database's word that the list missed no write
    # (not on the wire: the reply says so in a warning)
    unverified: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The window as a reply carries it (``speakers`` and ``unverified`` are not on
        the wire): its lists copied, their messages shared, since a window is read for
        one reply and not kept."""
        doc = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _NOT_SENT}
        for name in ("messages", "system", "tool"):
            doc[name] = list(doc[name])
        return doc


_NOT_SENT = frozenset({"speakers", "unverified"})


class SessionReader:
    def __init__(
        self,
        store: MessageLog,
        cache: HotCopy,
        count_tokens: CountTokens,
        *,
        stale: StaleHistories,
        max_token_window: int = 8000,
        summary_token_budget: int = 2000,
        default_last_n: int = 200,
        enforce_alternation: bool = True,
    ) -> None:
        self.store = store
        self.cache = cache
        self.stale = stale
        self.count_tokens = count_tokens
        self.max_token_window = max_token_window
        self.summary_token_budget = summary_token_budget
        self.default_last_n = default_last_n
        self.enforce_alternation = enforce_alternation

    async def messages(
        self, tenant_id: str, conversation_id: str, last_n: int
    ) -> tuple[list[dict[str, Any]], Read]:
        """The newest ``last_n`` messages, oldest first, and where they came from."""
        if last_n <= 0:
            raise ValueError("last_n must be positive")
        if not self.cache.enabled:
            CACHE_READS.labels("disabled").inc()
            return await self.store.recent(tenant_id, conversation_id, last_n), "database"
        if last_n > self.cache.history_max:
            # the list holds only history_max messages: the database has the rest
            CACHE_READS.labels("bypass").inc()
            return await self.store.recent(tenant_id, conversation_id, last_n), "database"
        (available, cached), lookup = await asyncio.gather(
            self._cached(tenant_id, conversation_id, last_n),
            self.stale.lookup(tenant_id, conversation_id),
        )
        if not available:
            CACHE_READS.labels("error").inc()
            return await self.store.recent(tenant_id, conversation_id, last_n), "database"
        if lookup.stale:
            CACHE_READS.labels("stale").inc()
            return await self._rebuild(tenant_id, conversation_id, last_n, lookup), "database"
        if cached is not None:
            CACHE_READS.labels("hit" if lookup.checked else "unchecked").inc()
            return cached, "cache" if lookup.checked else "unverified"
        CACHE_READS.labels("miss").inc()
        return await self._rebuild(tenant_id, conversation_id, last_n, None), "database"

    async def _cached(
        self, tenant_id: str, conversation_id: str, n: int
    ) -> tuple[bool, list[dict[str, Any]] | None]:
        """(whether Redis answered, the cached messages or None on a miss)"""
        try:
            return True, await self.cache.read(tenant_id, conversation_id, n)
        except CacheUnavailable:
            return False, None

    async def _rebuild(
        self, tenant_id: str, conversation_id: str, last_n: int, stale: Lookup | None
    ) -> list[dict[str, Any]]:
        """The database's newest messages; the list rebuilt from them on a miss,
        or on a stale list whose mark was found (the mark is cleared then)."""
        if stale is not None and stale.mark is None:  # held here, mark not stored yet
            return await self.store.recent(tenant_id, conversation_id, last_n)
        try:
            version = await self.cache.version(tenant_id, conversation_id)
        except CacheUnavailable:
            return await self.store.recent(tenant_id, conversation_id, last_n)
        docs = await self.store.recent(tenant_id, conversation_id, self.cache.history_max)
        if docs:
            with contextlib.suppress(CacheUnavailable):
                rebuilt = await self.cache.backfill(tenant_id, conversation_id, docs, version)
                if rebuilt and stale is not None:
                    await self.stale.rebuilt(stale)
        return docs[-last_n:]

    async def summary(self, tenant_id: str, conversation_id: str) -> str | None:
        if self.cache.enabled:
            try:
                cached = await self.cache.get_summary(tenant_id, conversation_id)
                if cached is not None:
                    return str(cached["text"]) if cached.get("text") else None
            except CacheUnavailable:
                pass
        row = await self.store.summary(tenant_id, conversation_id)
        if row is None:
            return None
        if self.cache.enabled:
            with contextlib.suppress(CacheUnavailable):
                await self.cache.set_summary(
                    tenant_id, conversation_id,
                    {"text": row.text, "covered_until_id": row.covered_until_id},
                )
        return row.text

    async def window(
        self,
        tenant_id: str,
        conversation_id: str,
        *,
        last_n: int | None = None,
        max_tokens: int | None = None,
        screen: Screen | None = None,
    ) -> SessionWindow:
        """The window of the last ``last_n`` messages within ``max_tokens``; with
        ``screen``, the messages and summary it gives are the ones the window is
        built from (alternation, token fitting and the summary's copy follow them),
        while ``considered`` and ``speakers`` still count every message read."""
        n = last_n or self.default_last_n
        limit = max_tokens or self.max_token_window
        docs, source = await self.messages(tenant_id, conversation_id, n)
        summary = await self.summary(tenant_id, conversation_id) if docs else None
        read, speakers = len(docs), sorted(
            {str(d["user_id"]) for d in docs if d.get("user_id") is not None})
        if screen is not None and docs:
            docs, summary = await screen(list(docs), summary)
        budget = min(self.summary_token_budget, limit // 2)
        w: Window = build_window(
            docs,
            summary,
            max_tokens=limit,
            summary_budget=budget,
            count=self.count_tokens,
            enforce_alternation=self.enforce_alternation,
        )
        return SessionWindow(
            tenant_id=tenant_id,
            conversation_id=conversation_id,
            messages=w.messages,
            system=w.system,
            tool=w.tool,
            summary=summary if w.summary_used else None,
            tokens=w.tokens,
            truncated=w.truncated,
            source="database" if source == "database" else "cache",
            considered=read,
            speakers=speakers,
            unverified=source == "unverified",
        )
