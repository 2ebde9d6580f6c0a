"""What the query stage needs from outside, named for the need. The adapters
implementing each port are named in its docstring; ``streams/worker/wiring.py``
builds them, ``streams.testing.query`` has an in-memory double of each."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Protocol

from streams.query.model import Claim
from streams.session.reader import Docs
from streams.wire.envelope import Outgoing, SourceRecord
from streams.wire.query import MemoryQuery, MemoryReply

MaybeSeen = Callable[[SourceRecord], bool]
"""The consumer's word on a request: it may have been delivered before (it was in
its partition's backlog when the partition was assigned), or it is new to the group."""

Settling = Awaitable[None] | None
"""What an answered request still has to finish, its reply out, before it counts as
answered (its record's durable write); None: nothing."""


class MemoryLookup(Protocol):
    """One memory lookup, request to reply (:class:`~streams.query.engine.QueryEngine`)."""

    async def answer(self, q: MemoryQuery, budget_s: float | None = None) -> MemoryReply:
        """The reply, each part within ``budget_s`` (default the request's ``timeout_ms``);
        raises what a part it could not turn into a warning raised."""
        ...


class ReplySink(Protocol):
    """Where replies and receipts go, without lingering
    (:class:`~streams.adapters.kafka.replies.ReplyPublisher`)."""

    async def deliver(self, r: Outgoing) -> bool:
        """Send one reply; True once the broker acknowledged it, False when it could not
        be sent in time (logged). Raises nothing but cancellation."""
        ...


class SentReplies(Protocol):
    """The reply topics, searched for a reply an earlier attempt may have sent
    (:class:`~streams.adapters.kafka.reply_lookup.ReplyLookup`)."""

    async def sent(self, topic: str, correlation_id: bytes, since_ms: int,
                   partition: int | None = None) -> bool | None:
        """True when the reply carrying ``correlation_id`` is in ``topic`` (in
        ``partition`` when one was addressed) from ``since_ms`` on; False when it is
        not; None when that is unknown. Raises nothing but cancellation."""
        ...


class AnsweredRecord(Protocol):
    """The quick copy of which requests were answered, and when an attempt began
    (:class:`~streams.adapters.redis.answered_record.RedisAnsweredRecord`), by
    :func:`~streams.query.answered.request_key`. Keys live a while: longer than any
    caller waits."""

    async def claim(self, key: str, now_ms: int) -> Claim:
        """Whether the request's answer was recorded, and when an earlier attempt began
        that recorded none; marks that an attempt begins at ``now_ms`` unless an earlier
        one's mark is there (the first attempt's time is kept). One round trip.
        Raises :class:`~streams.stores.CacheUnavailable` when it failed."""
        ...

    async def take_over(self, key: str, now_ms: int) -> bool:
        """Mark that an attempt begins at ``now_ms`` only when no answer is recorded and no
        attempt's mark is there; whether it was marked. One atomic round trip. Raises
        :class:`~streams.stores.CacheUnavailable` when it failed."""
        ...

    async def remember(self, key: str) -> None:
        """The reply was acknowledged: the answer is recorded and the attempt's mark
        removed, in one round trip. Raises :class:`~streams.stores.CacheUnavailable`."""
        ...


class DurableAnswers(Protocol):
    """The database's copy of which requests were answered, by
    :func:`~streams.query.answered.request_key`
    (:class:`~streams.adapters.db.answered_store.AnsweredStore`)."""

    async def add(self, keys: Sequence[str], now: datetime) -> None:
        """Record ``keys`` as answered at ``now`` (a key recorded before stays). Raises
        the store's error when it failed: the caller logs it and goes on."""
        ...

    async def exists(self, key: str) -> bool:
        """Whether ``key`` was recorded. Raises the store's error when it failed."""
        ...


class WindowScreen(Protocol):
    """The Session window screened for sensitive content, when the deployment asks
    (:class:`~streams.adapters.sensitive.window_screening.WindowScreening`)."""

    async def screen(self, tenant_id: str, agent_id: str, docs: Docs,
                     summary: str | None) -> tuple[Docs, str | None]:
        """The window's messages and summary under the tenant's and agent's policy,
        before the window is built from them."""
        ...
