"""Which requests were answered, for a little while, so that a request delivered
again after its worker died between the reply and the commit is not answered
twice. Two copies of the record, both written right after the broker
acknowledged the reply, before the request counts as answered (and so before
its offset can be committed):

* Redis, one key per reply topic and correlation id
  (``{prefix}:answered:{topic}:{correlation id, hex}``), read first;
* the database (:class:`DurableAnswers`, the ``answered_request`` table), read
  when Redis does not know the request and the request may have been delivered
  before (the consumer says so: it was in its partition's backlog when the
  partition was assigned) — so a Redis that restarted empty forgets nothing.
  Writes are grouped: requests completing while a write is in flight go
  together in the next one.

A worker can die after the broker took a reply and before either copy was
written. So when an attempt begins, Redis also gets when it began
(``{prefix}:sending:{topic}:{hex}``, the first attempt's time kept, removed
when the answer is recorded): the next attempt learns from :meth:`claim` that
an earlier one began and recorded nothing, and looks for the reply in the
reply topic (:class:`~streams.adapters.kafka.reply_lookup.ReplyLookup`).
The check, the read of that time and the write of this attempt's are one
Redis round trip; recording an answer and removing the time, another.

The record is a safeguard, never a gate: with Redis or the database
unreachable every request is answered, as without it, and Redis is skipped for
``retry_after_s`` after a failure. Keys live ``ttl_s``: longer than any caller
waits (``MAX_TIMEOUT_MS``), after which a redelivered request has expired anyway
(:mod:`streams.query.expiry`). Requests without a correlation id cannot be
matched by their caller, nor here.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from redis.asyncio import Redis
from redis.exceptions import RedisError

from streams.backoff import FailureBackoff
from streams.wire.query import MAX_TIMEOUT_MS

log = logging.getLogger(__name__)

ANSWERED_TTL_S = 2 * MAX_TIMEOUT_MS // 1000


def request_key(reply_topic: str, correlation_id: bytes) -> str:
    """The durable record's key of one request: a digest of its reply address."""
    return hashlib.sha256(reply_topic.encode() + b"\x00" + correlation_id).hexdigest()


@dataclass(frozen=True, slots=True)
class Claim:
    """What is known of a request before it is answered."""

    answered: bool  # its answer was recorded: not to be answered again
    # when an earlier attempt began (epoch ms) that recorded no answer: its reply
    # may have gone out all the same
    began_ms: int | None = None


class DurableAnswers(Protocol):
    async def add(self, keys: Sequence[str], now: datetime) -> None: ...

    async def exists(self, key: str) -> bool: ...


class _Grouped:
    """Writes keys in groups: a write waits ``linger_s`` for more keys, one write
    is in flight, the keys added meanwhile go in the next; ``add`` returns once
    its key's write is done (or failed). The reply is out before: the wait
    delays only the request's commit, not its caller."""

    def __init__(self, durable: DurableAnswers, now: Callable[[], datetime],
                 max_batch: int = 500, linger_s: float = 0.1) -> None:
        self.durable = durable
        self.now = now
        self.max_batch = max_batch
        self.linger_s = linger_s
        self._waiting: list[tuple[str, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def add(self, key: str) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((key, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.ensure_future(self._write())
        await asyncio.shield(done)

    async def _write(self) -> None:
        while self._waiting:
            if len(self._waiting) < self.max_batch:
                await asyncio.sleep(self.linger_s)
            batch = self._waiting[:self.max_batch]
            del self._waiting[:self.max_batch]
            try:
                await self.durable.add([k for k, _ in batch], self.now())
            except Exception as exc:  # a safeguard, never a gate
                log.warning("answered-request record: database write failed: %s: %s",
                            type(exc).__name__, exc)
            for _, done in batch:
                if not done.done():
                    done.set_result(None)


class AnsweredRequests:
    def __init__(self, redis: Redis | None, *, prefix: str, ttl_s: int = ANSWERED_TTL_S,
                 retry_after_s: float = 2.0, clock: Callable[[], float] = time.monotonic,
                 durable: DurableAnswers | None = None,
                 wall_clock: Callable[[], float] = time.time) -> None:
        self.redis = redis
        self.prefix = prefix
        self.ttl_s = ttl_s
        self._backoff = FailureBackoff(retry_after_s, clock)
        self._wall_clock = wall_clock
        self.durable = durable
        self._grouped = None if durable is None else _Grouped(
            durable, lambda: datetime.fromtimestamp(wall_clock(), UTC))

    def key(self, reply_topic: str, correlation_id: bytes) -> str:
        return f"{self.prefix}:answered:{reply_topic}:{correlation_id.hex()}"

    def sending_key(self, reply_topic: str, correlation_id: bytes) -> str:
        return f"{self.prefix}:sending:{reply_topic}:{correlation_id.hex()}"

    def _usable(self) -> Redis | None:
        return self.redis if self.redis is not None and self._backoff.ready() else None

    def _failed(self, what: str, exc: BaseException) -> None:
        self._backoff.failed()
        log.warning("answered-request record: redis %s failed: %s: %s",
                    what, type(exc).__name__, exc)

    async def claim(self, reply_topic: str, correlation_id: bytes, *,
                    maybe_seen: bool = True) -> Claim:
        """Whether this request's reply was recorded as sent before, and when an
        earlier attempt began that recorded nothing; marks that this one begins.
        ``maybe_seen``: the request may have been delivered before (else the
        database is not asked: a request new to the group cannot have been answered)."""
        began: int | None = None
        redis = self._usable()
        if redis is not None:
            sending = self.sending_key(reply_topic, correlation_id)
            try:
                pipe = redis.pipeline(transaction=False)
                pipe.exists(self.key(reply_topic, correlation_id))
                pipe.get(sending)
                pipe.set(sending, str(int(self._wall_clock() * 1000)).encode(),
                         ex=self.ttl_s, nx=True)
                answered, earlier, _ = await pipe.execute()
            except (RedisError, OSError) as exc:
                self._failed("read", exc)
            else:
                if answered:
                    return Claim(answered=True)
                began = _epoch_ms(earlier)
        if self.durable is None or not maybe_seen:
            return Claim(answered=False, began_ms=began)
        try:
            found = await self.durable.exists(request_key(reply_topic, correlation_id))
        except Exception as exc:  # a safeguard, never a gate
            log.warning("answered-request record: database read failed: %s: %s",
                        type(exc).__name__, exc)
            found = False
        return Claim(answered=True) if found else Claim(answered=False, began_ms=began)

    async def remember(self, reply_topic: str, correlation_id: bytes) -> None:
        """The reply was acknowledged by the broker: both copies are written."""
        redis = self._usable()
        if redis is not None:
            try:
                pipe = redis.pipeline(transaction=False)
                pipe.set(self.key(reply_topic, correlation_id), b"1", ex=self.ttl_s)
                pipe.delete(self.sending_key(reply_topic, correlation_id))
                await pipe.execute()
            except (RedisError, OSError) as exc:
                self._failed("write", exc)
        if self._grouped is not None:
            await self._grouped.add(request_key(reply_topic, correlation_id))


def _epoch_ms(value: object) -> int | None:
    """An attempt's beginning as Redis holds it (None: none, or not a number)."""
    if not isinstance(value, bytes | str):
        return None
    try:
        return int(value)
    except ValueError:
        return None
