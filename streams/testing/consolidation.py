"""In-memory doubles of consolidation's ports (:mod:`streams.consolidation.ports`):
the pending expiries, the summary cache and the sensitive-content detector.

The ledger, the runs and the reprocess jobs have no double: their contracts are
transactions over the schema, so the tests run them on SQLite instead.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from streams.consolidation.model import CandidateRow, PendingExpiry, Run
from streams.consolidation.rules.sensitive.kinds import Finding, Kind, resolved
from streams.memory.provider import Scope
from streams.stores import CacheUnavailable


@dataclass
class Attempt:
    """A failed attempt the sweeper recorded."""

    item: PendingExpiry
    error: str
    next_at: datetime


class InMemoryExpiries:
    """The :class:`~streams.consolidation.ports.Expiries` in a dict. ``handed`` keeps
    every ``(closed_id, seq)`` handed over, ``swept`` those done, ``attempts`` each
    failure; :meth:`add` puts an expiry in directly."""

    def __init__(self) -> None:
        self.pending: dict[tuple[str, int], tuple[PendingExpiry, datetime]] = {}
        self.handed: list[tuple[str, int]] = []
        self.swept: list[PendingExpiry] = []
        self.attempts: list[Attempt] = []

    def add(self, item: PendingExpiry, next_at: datetime) -> None:
        self.pending[(item.closed_id, item.seq)] = (item, next_at)

    async def hand_over(self, run: Run, row: CandidateRow, error: str, now: datetime,
                        first_delay_s: float) -> None:
        key = (run.closed_id, row.seq)
        self.handed.append(key)
        if key not in self.pending:
            self.add(PendingExpiry(run.closed_id, row.seq,
                                   Scope(run.tenant_id, row.owner(run), run.agent_id),
                                   run.provider, row.cube, list(row.expire_ids),
                                   row.memory_id or "", 1),
                     now + timedelta(seconds=first_delay_s))

    async def due(self, now: datetime, limit: int = 100) -> list[PendingExpiry]:
        ready = sorted((at, item.closed_id, item.seq, item)
                       for item, at in self.pending.values() if at <= now)
        return [item for *_, item in ready[:limit]]

    async def done(self, item: PendingExpiry, now: datetime) -> None:
        self.pending.pop((item.closed_id, item.seq), None)
        self.swept.append(item)

    async def failed(self, item: PendingExpiry, error: str, next_at: datetime) -> None:
        self.attempts.append(Attempt(item, error, next_at))
        self.pending[(item.closed_id, item.seq)] = (
            replace(item, attempts=item.attempts + 1), next_at)

    async def count(self) -> int:
        return len(self.pending)


class InMemorySummaryCache:
    """The :class:`~streams.consolidation.ports.SummaryCache` in a dict; ``failing``:
    every call raises :class:`~streams.stores.CacheUnavailable`."""

    def __init__(self, *, enabled: bool = True) -> None:
        self._enabled = enabled
        self.failing = False
        self.summaries: dict[tuple[str, str], dict[str, Any]] = {}

    @property
    def enabled(self) -> bool:
        return self._enabled

    async def set_summary(self, tenant_id: str, conversation_id: str,
                          summary: dict[str, Any]) -> None:
        if self.failing:
            raise CacheUnavailable("cache down")
        self.summaries[(tenant_id, conversation_id)] = summary

    async def forget(self, conversations: Sequence[tuple[str, str]]) -> int:
        if self.failing:
            raise CacheUnavailable("cache down")
        return sum(self.summaries.pop(k, None) is not None for k in conversations)


class ListedDetector:
    """The :class:`~streams.consolidation.ports.SensitiveDetector` over a fixed list:
    every occurrence of a listed string is a finding of its kind (no library, no
    model); ``seen`` keeps every text asked about."""

    def __init__(self, listed: dict[str, Kind], *, finds_names: bool = True) -> None:
        self.listed = listed
        self.finds_names = finds_names
        self.seen: list[str] = []
        self.threads: set[str] = set()  # the names of the threads detect ran in

    async def detect_all(self, texts: Sequence[str]) -> list[list[Finding]]:
        return await asyncio.to_thread(lambda: [self.detect(t) for t in texts])

    def detect(self, text: str) -> list[Finding]:
        self.seen.append(text)
        self.threads.add(threading.current_thread().name)
        found = []
        for value, kind in self.listed.items():
            at = text.find(value)
            while at >= 0 and value:
                found.append(Finding(at, at + len(value), kind))
                at = text.find(value, at + 1)
        return resolved(found)
