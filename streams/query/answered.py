"""Which requests were answered, for a little while: one Redis key per reply topic
and correlation id (``{prefix}:answered:{topic}:{correlation id, hex}``), set
right after the broker acknowledged the reply and read before a request is
answered. A request redelivered after its worker died between the reply and
the commit is then not answered again.

The record is a safeguard, never a gate: with Redis unreachable (or turned
off) every request is answered, as without it, and Redis is skipped for
``retry_after_s`` after a failure. Keys live ``ttl_s``: longer than any caller
waits (``MAX_TIMEOUT_MS``), after which a redelivered request has expired anyway
(:mod:`streams.query.expiry`). Requests without a correlation id cannot be
matched by their caller, nor here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from redis.asyncio import Redis
from redis.exceptions import RedisError

from streams.backoff import FailureBackoff
from streams.wire.query import MAX_TIMEOUT_MS

log = logging.getLogger(__name__)

ANSWERED_TTL_S = 2 * MAX_TIMEOUT_MS // 1000


class AnsweredRequests:
    def __init__(self, redis: Redis | None, *, prefix: str, ttl_s: int = ANSWERED_TTL_S,
                 retry_after_s: float = 2.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.redis = redis
        self.prefix = prefix
        self.ttl_s = ttl_s
        self._backoff = FailureBackoff(retry_after_s, clock)

    def key(self, reply_topic: str, correlation_id: bytes) -> str:
        return f"{self.prefix}:answered:{reply_topic}:{correlation_id.hex()}"

    def _usable(self) -> Redis | None:
        return self.redis if self.redis is not None and self._backoff.ready() else None

    def _failed(self, what: str, exc: BaseException) -> None:
        self._backoff.failed()
        log.warning("answered-request record: redis %s failed: %s: %s",
                    what, type(exc).__name__, exc)

    async def answered(self, reply_topic: str, correlation_id: bytes) -> bool:
        """True when this request's reply was sent before; False when not, or unknown."""
        redis = self._usable()
        if redis is None:
            return False
        try:
            return bool(await redis.exists(self.key(reply_topic, correlation_id)))
        except (RedisError, OSError) as exc:
            self._failed("read", exc)
            return False

    async def remember(self, reply_topic: str, correlation_id: bytes) -> None:
        """The reply was acknowledged by the broker."""
        redis = self._usable()
        if redis is None:
            return
        try:
            await redis.set(self.key(reply_topic, correlation_id), b"1", ex=self.ttl_s)
        except (RedisError, OSError) as exc:
            self._failed("write", exc)
