"""Which requests were answered, for a little while, so that a request delivered
again after its worker died between the reply and the commit is not answered
twice. Two copies of the record, both written right after the broker
acknowledged the reply, before the request counts as answered (and so before
its offset can be committed):

* the quick copy (:class:`~streams.query.ports.AnsweredRecord`; Redis, one key
  per reply topic and correlation id), read first;
* the database (:class:`~streams.query.ports.DurableAnswers`, the ``answered_request`` table), read
  when Redis does not know the request and the request may have been delivered
  before (the consumer says so: it was in its partition's backlog when the
  partition was assigned) — so a Redis that restarted empty forgets nothing.
  Writes are grouped: requests completing while a write is in flight go
  together in the next one.

A worker can die after the broker took a reply and before either copy was
written. So when an attempt begins, the quick copy also gets when it began
(the first attempt's time kept, removed when the answer is recorded): the
next attempt learns from :meth:`claim` that an earlier one began and recorded
nothing, and looks for the reply in the reply topic
(:class:`~streams.query.ports.SentReplies`).
The check, the read of that time and the write of this attempt's are one
round trip; recording an answer and removing the time, another.

The record is a safeguard, never a gate: with Redis or the database
unreachable every request is answered, as without it, and the quick copy is
skipped for ``retry_after_s`` after a failure. Keys live a while: longer than
any caller waits (``MAX_TIMEOUT_MS``), after which a redelivered request has expired anyway
(:mod:`streams.query.expiry`). Requests without a correlation id cannot be
matched by their caller, nor here; refused requests (unreadable, unsigned) are
never recorded, so they cannot stand for another request.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

from streams.backoff import FailureBackoff
from streams.query.model import Claim
from streams.query.ports import AnsweredRecord, DurableAnswers
from streams.stores import CacheUnavailable
from streams.wire.query import MAX_TIMEOUT_MS

log = logging.getLogger(__name__)

ANSWERED_TTL_S = 2 * MAX_TIMEOUT_MS // 1000


def request_key(tenant_id: str, reply_topic: str, reply_partition: int | None,
                correlation_id: bytes, value: bytes) -> str:
    """The record's key of one request: a digest of its tenant, its reply address
    (topic, partition, correlation id) and its bytes. Two requests share it only when
    all of these are the same — the copies of one hedged request do; two tenants'
    requests never do, whatever correlation ids they use."""
    digest = hashlib.sha256()
    for part in (tenant_id.encode(), reply_topic.encode(),
                 b"" if reply_partition is None else str(reply_partition).encode(),
                 correlation_id, hashlib.sha256(value).digest()):
        digest.update(len(part).to_bytes(4, "big"))
        digest.update(part)
    return digest.hexdigest()


class _Grouped:
    """Writes keys in groups: a write waits ``linger_s`` for more keys, one write
    is in flight, the keys added meanwhile go in the next; ``add`` returns a future done once
    its key's write is done, failed, or given up after ``write_timeout_s``. The reply is
    out before: the wait delays only the request's commit, not its caller, nor the query
    consumer's slot."""

    def __init__(self, durable: DurableAnswers, now: Callable[[], datetime],
                 max_batch: int = 500, linger_s: float = 0.1,
                 write_timeout_s: float = 5.0) -> None:
        self.durable = durable
        self.now = now
        self.max_batch = max_batch
        self.linger_s = linger_s
        self.write_timeout_s = write_timeout_s
        self._waiting: list[tuple[str, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None

    def add(self, key: str) -> asyncio.Future[None]:
        """Queue ``key`` for the next write; done once that write is (or failed)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((key, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.ensure_future(self._write())
        return done

    async def _write(self) -> None:
        while self._waiting:
            if len(self._waiting) < self.max_batch:
                await asyncio.sleep(self.linger_s)
            batch = self._waiting[:self.max_batch]
            del self._waiting[:self.max_batch]
            try:  # bounded: the requests waiting for it are not committed meanwhile
                await asyncio.wait_for(self.durable.add([k for k, _ in batch], self.now()),
                                       self.write_timeout_s)
            except Exception as exc:  # a safeguard, never a gate
                log.warning("answered-request record: database write failed: %s: %s",
                            type(exc).__name__, exc)
            for _, done in batch:
                if not done.done():
                    done.set_result(None)


class AnsweredRequests:
    """Both copies of the record; ``record`` None: no quick copy (no Redis)."""

    def __init__(self, record: AnsweredRecord | None, *, retry_after_s: float = 2.0,
                 clock: Callable[[], float] = time.monotonic,
                 durable: DurableAnswers | None = None,
                 wall_clock: Callable[[], float] = time.time) -> None:
        self.record = record
        self._backoff = FailureBackoff(retry_after_s, clock)
        self._wall_clock = wall_clock
        self.durable = durable
        self._grouped = None if durable is None else _Grouped(
            durable, lambda: datetime.fromtimestamp(wall_clock(), UTC))

    def wall_clock(self) -> float:
        """Now, epoch seconds, by the clock attempts are marked with."""
        return self._wall_clock()

    def _usable(self) -> AnsweredRecord | None:
        return self.record if self.record is not None and self._backoff.ready() else None

    def _failed(self, what: str, exc: CacheUnavailable) -> None:
        self._backoff.failed()
        log.warning("answered-request record: redis %s failed: %s", what, exc)

    async def claim(self, key: str, *, maybe_seen: bool = True) -> Claim:
        """Whether this request's reply was recorded as sent before, and when an
        earlier attempt began that recorded nothing; marks that this one begins.
        ``maybe_seen``: the request may have been delivered before (else the
        database is not asked: a request new to the group cannot have been answered)."""
        began: int | None = None
        record = self._usable()
        if record is not None:
            try:
                quick = await record.claim(key, int(self._wall_clock() * 1000))
            except CacheUnavailable as exc:
                self._failed("read", exc)
            else:
                if quick.answered:
                    return quick
                began = quick.began_ms
        if self.durable is None or not maybe_seen:
            return Claim(answered=False, began_ms=began)
        try:
            found = await self.durable.exists(key)
        except Exception as exc:  # a safeguard, never a gate
            log.warning("answered-request record: database read failed: %s: %s",
                        type(exc).__name__, exc)
            found = False
        return Claim(answered=True) if found else Claim(answered=False, began_ms=began)

    async def take_over(self, key: str) -> bool:
        """For a request another member holds: True only when the quick copy says that
        no attempt began and no answer was recorded — and now marks that this one begins —
        and the database does not have its answer either (an owner that answered while
        Redis was away, or before it restarted empty, recorded it there only). False when
        anything else is known, or nothing is (no Redis, or it failed): the request is
        then left to its partition's owner, so that it is not answered by every member
        at once. The database is read only when the quick copy has taken it over."""
        record = self._usable()
        if record is None:
            return False
        try:
            if not await record.take_over(key, int(self._wall_clock() * 1000)):
                return False
        except CacheUnavailable as exc:
            self._failed("take-over", exc)
            return False
        if self.durable is None:
            return True
        try:
            return not await self.durable.exists(key)
        except Exception as exc:  # a safeguard, never a gate
            log.warning("answered-request record: database read failed: %s: %s",
                        type(exc).__name__, exc)
            return True

    async def remember(self, key: str) -> asyncio.Future[None] | None:
        """The reply was acknowledged by the broker: the quick copy is written, and the
        durable one's write returned under way (None: no database) — the request counts
        as answered once that is done too."""
        record = self._usable()
        if record is not None:
            try:
                await record.remember(key)
            except CacheUnavailable as exc:
                self._failed("write", exc)
        return None if self._grouped is None else self._grouped.add(key)
