"""The quick copy of the answered-request record in Redis
(:class:`~streams.query.ports.AnsweredRecord`).

One key per request (:func:`~streams.query.answered.request_key`):
``{prefix}:answered:{{key}}`` once the answer is recorded, ``{prefix}:sending:{{key}}``
(the first attempt's epoch ms) while an attempt is under way. A claim reads both and writes
the second in one pipeline; remembering writes the first and deletes the second
in another; a take-over sets the second only when neither is there — or, given
a time before which an attempt counts as dead, takes the request from such an
attempt once (``{prefix}:rescuing:{{key}}``) — in one script. All live ``ttl_s``.
"""

from __future__ import annotations

from redis.asyncio import Redis
from redis.exceptions import RedisError

from streams.query.answered import ANSWERED_TTL_S
from streams.query.model import Claim, TakeOver
from streams.stores import CacheUnavailable

# KEYS: answered, sending, rescuing; ARGV: now_ms, ttl_s, stale_before_ms (-1: none).
# -2: answered; -1: under way; 0: taken (marked); > 0: taken from the stale attempt
# that began then (once: the rescuing key)
_TAKE_OVER = """
if redis.call('EXISTS', KEYS[1]) == 1 then return -2 end
if redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2], 'NX') then return 0 end
local began = tonumber(redis.call('GET', KEYS[2]))
local stale = tonumber(ARGV[3])
if began == nil or stale < 0 or began >= stale then return -1 end
if redis.call('SET', KEYS[3], ARGV[1], 'EX', ARGV[2], 'NX') then return math.max(began, 1) end
return -1
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

    def rescuing_key(self, request: str) -> str:
        return f"{self.prefix}:rescuing:{{{request}}}"

    async def claim(self, request: str, now_ms: int) -> Claim:
        sending = self.sending_key(request)
        try:
            pipe = self.redis.pipeline(transaction=False)
            pipe.exists(self.key(request))
            pipe.get(sending)
            pipe.set(sending, str(now_ms).encode(), ex=self.ttl_s, nx=True)
            answered, earlier, _ = await pipe.execute()
        except (RedisError, OSError) as exc:
            raise CacheUnavailable(f"{type(exc).__name__}: {exc}") from exc
        return Claim(answered=True) if answered else Claim(False, _epoch_ms(earlier))

    async def take_over(self, request: str, now_ms: int,
                        stale_before_ms: int | None = None) -> TakeOver:
        keys = [self.key(request), self.sending_key(request), self.rescuing_key(request)]
        try:
            got = int(await self._take_over(keys=keys, args=[
                now_ms, self.ttl_s, -1 if stale_before_ms is None else stale_before_ms]))
        except (RedisError, OSError, ValueError) as exc:
            raise CacheUnavailable(f"{type(exc).__name__}: {exc}") from exc
        if got == -2:
            return TakeOver(False)
        if got == -1:
            return TakeOver(False, under_way=True)
        return TakeOver(True, stale_began_ms=got or None)

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
