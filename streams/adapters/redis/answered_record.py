"""The quick copy of the answered-request record in Redis
(:class:`~streams.query.ports.AnsweredRecord`).

One key per request (:func:`~streams.query.answered.request_key`):
``{prefix}:answered:{{key}}`` once the answer is recorded, ``{prefix}:sending:{{key}}``
(the first attempt's epoch ms) while an attempt is under way. A claim reads both and writes
the second in one pipeline; remembering writes the first and deletes the second
in another; a take-over sets the second only when neither is there, in one
script. Both live ``ttl_s``.
"""

from __future__ import annotations

from redis.asyncio import Redis
from redis.exceptions import RedisError

from streams.query.answered import ANSWERED_TTL_S
from streams.query.model import Claim
from streams.stores import CacheUnavailable

# KEYS: answered, sending; ARGV: now_ms, ttl_s. 1 when the sending mark was set.
_TAKE_OVER = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2], 'NX') then return 1 end
return 0
"""


class RedisAnsweredRecord:
    def __init__(self, redis: Redis, *, prefix: str, ttl_s: int = ANSWERED_TTL_S) -> None:
        self.redis = redis
        self.prefix = prefix
        self.ttl_s = ttl_s
        self._take_over = redis.register_script(_TAKE_OVER)

    # both keys of a request share a hash tag: one Redis Cluster slot, one script
    def key(self, request: str) -> str:
        return f"{self.prefix}:answered:{{{request}}}"

    def sending_key(self, request: str) -> str:
        return f"{self.prefix}:sending:{{{request}}}"

    async def claim(self, request: str, now_ms: int) -> Claim:
        sending = self.sending_key(request)
        try:
            # one MULTI: no take-over script may land between the read and the mark
            pipe = self.redis.pipeline(transaction=True)
            pipe.exists(self.key(request))
            pipe.get(sending)
            pipe.set(sending, str(now_ms).encode(), ex=self.ttl_s, nx=True)
            answered, earlier, _ = await pipe.execute()
        except (RedisError, OSError) as exc:
            raise CacheUnavailable(f"{type(exc).__name__}: {exc}") from exc
        return Claim(answered=True) if answered else Claim(False, _epoch_ms(earlier))

    async def take_over(self, request: str, now_ms: int) -> bool:
        try:
            marked = await self._take_over(keys=[self.key(request), self.sending_key(request)],
                                           args=[now_ms, self.ttl_s])
        except (RedisError, OSError) as exc:
            raise CacheUnavailable(f"{type(exc).__name__}: {exc}") from exc
        return bool(marked)

    async def remember(self, request: str) -> None:
        try:
            pipe = self.redis.pipeline(transaction=False)
            pipe.set(self.key(request), b"1", ex=self.ttl_s)
            pipe.delete(self.sending_key(request))
            await pipe.execute()
        except (RedisError, OSError) as exc:
            raise CacheUnavailable(f"{type(exc).__name__}: {exc}") from exc


def _epoch_ms(value: object) -> int | None:
    """An attempt's beginning as Redis holds it (None: none, or not a number)."""
    if not isinstance(value, bytes | str):
        return None
    try:
        return int(value)
    except ValueError:
        return None
