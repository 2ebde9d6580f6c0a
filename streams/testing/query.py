"""In-memory doubles of the query stage's ports (:mod:`streams.query.ports`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime

from streams.query.model import Claim
from streams.stores import CacheUnavailable
from streams.wire.envelope import Outgoing
from streams.wire.query import MemoryQuery, MemoryReply


class EchoLookup:
    """:class:`~streams.query.ports.MemoryLookup` answering every query with an empty
    reply of its ids; ``asked``: the queries, in order."""

    def __init__(self) -> None:
        self.asked: list[MemoryQuery] = []
        self.budgets: list[float | None] = []

    async def answer(self, q: MemoryQuery, budget_s: float | None = None) -> MemoryReply:
        self.asked.append(q)
        self.budgets.append(budget_s)
        return MemoryReply(request_id=q.request_id, tenant_id=q.tenant_id)


class RecordedReplies:
    """:class:`~streams.query.ports.ReplySink` keeping what it delivered; ``fail``:
    nothing is delivered (as a producer that gave up on a reply)."""

    def __init__(self) -> None:
        self.sent: list[Outgoing] = []
        self.fail = False

    async def deliver(self, r: Outgoing) -> bool:
        if self.fail:
            return False
        self.sent.append(r)
        return True


class KnownReplies:
    """:class:`~streams.query.ports.SentReplies` giving ``found`` for every lookup;
    ``asked``: (topic, correlation id, since ms) of each."""

    def __init__(self, found: bool | None) -> None:
        self.found = found
        self.asked: list[tuple[str, bytes, int]] = []

    async def sent(self, topic: str, correlation_id: bytes, since_ms: int,
                   partition: int | None = None) -> bool | None:
        self.asked.append((topic, correlation_id, since_ms))
        return self.found


class MemoryAnsweredRecord:
    """:class:`~streams.query.ports.AnsweredRecord` in two dicts. ``calls`` counts round
    trips; ``down``: each raises :class:`CacheUnavailable`; ``gate``, when set, holds
    each round trip until it opens."""

    def __init__(self) -> None:
        self.answered: set[str] = set()
        self.began: dict[str, int] = {}
        self.calls = 0
        self.down = False
        self.gate: asyncio.Event | None = None

    async def _round_trip(self) -> None:
        if self.gate is not None:
            await self.gate.wait()
        self.calls += 1
        if self.down:
            raise CacheUnavailable("ConnectionError: connection refused")

    async def claim(self, key: str, now_ms: int) -> Claim:
        await self._round_trip()
        if key in self.answered:
            return Claim(answered=True)
        earlier = self.began.get(key)
        self.began.setdefault(key, now_ms)
        return Claim(answered=False, began_ms=earlier)

    async def take_over(self, key: str, now_ms: int) -> bool:
        await self._round_trip()
        if key in self.answered or key in self.began:
            return False
        self.began[key] = now_ms
        return True

    async def remember(self, key: str) -> None:
        await self._round_trip()
        self.answered.add(key)
        self.began.pop(key, None)


class MemoryDurableAnswers:
    """:class:`~streams.query.ports.DurableAnswers` in a set; ``writes``: the keys of
    each write; ``reads`` counts lookups; ``down``: each raises ``ConnectionError``."""

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.writes: list[list[str]] = []
        self.reads = 0
        self.down = False

    async def add(self, keys: Sequence[str], now: datetime) -> None:
        if self.down:
            raise ConnectionError("database down")
        self.writes.append(list(keys))
        self.keys.update(keys)

    async def exists(self, key: str) -> bool:
        self.reads += 1
        if self.down:
            raise ConnectionError("database down")
        return key in self.keys
