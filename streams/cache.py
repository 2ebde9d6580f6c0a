"""ConversationCache: the hot copy of each conversation's newest messages in Redis.

One list per conversation, newest message at index 0, capped at
``history_max`` and expiring ``history_ttl_s`` after the last write. Redis is
a cache that may fail; the database is the truth. The rules that keep the
cache from ever serving a partial history:

* The worker creates a list only for a conversation it knows is new; for any
  other conversation it appends only to a list that exists (``LPUSHX``). A
  missing list is a miss, and a read rebuilds it from the database.
* Every write bumps a per-conversation version; a rebuild is a ``WATCH``ed
  transaction on that version, so a rebuild racing a write is abandoned.
* Conversations written while Redis was failing are remembered and their lists
  deleted on the first write that succeeds again; conversations whose events
  were already stored (a redelivery) are deleted too.
* After a failure Redis is skipped for ``retry_after_s`` so a dead cache costs
  no timeout per batch.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import NoScriptError, RedisError, WatchError

from streams.failure_backoff import FailureBackoff
from streams.metrics import CACHE_BACKFILLS

log = logging.getLogger(__name__)

ConversationKey = tuple[str, str]  # (tenant_id, conversation_id)
MessageDoc = dict[str, Any]
STALE_LIMIT = 1_000_000


# One round trip per conversation: bump the version, then append the new
# messages (LPUSH for a conversation known to be new, LPUSHX otherwise, so a
# missing list is never recreated partially), trim to the cap, refresh the TTL.
# KEYS: list, version. ARGV: mode (create|extend|bump), cap, ttl, messages...
APPEND_SCRIPT = """
redis.call('INCR', KEYS[2])
redis.call('EXPIRE', KEYS[2], ARGV[3])
if ARGV[1] == 'bump' or #ARGV < 4 then return 0 end
local n
if ARGV[1] == 'create' then
  n = redis.call('LPUSH', KEYS[1], unpack(ARGV, 4))
else
  n = redis.call('LPUSHX', KEYS[1], unpack(ARGV, 4))
end
if n > 0 then
  redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
  redis.call('EXPIRE', KEYS[1], ARGV[3])
end
return n
"""
APPEND_SCRIPT_SHA = hashlib.sha1(APPEND_SCRIPT.encode()).hexdigest()


class CacheUnavailableError(Exception):
    """Redis failed or is being skipped after a recent failure."""


class ConversationCache:
    def __init__(
        self,
        redis: Redis | None,
        *,
        prefix: str = "ms",
        history_max: int = 200,
        history_ttl_s: int = 86_400,
        summary_ttl_s: int = 3_600,
        retry_after_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.redis = redis
        self.prefix = prefix
        self.history_max = history_max
        self.history_ttl_s = history_ttl_s
        self.summary_ttl_s = summary_ttl_s
        self.retry_after_s = retry_after_s
        self._backoff = FailureBackoff(retry_after_s, clock)
        self._stale: set[ConversationKey] = set()

    @property
    def enabled(self) -> bool:
        return self.redis is not None

    # ------------------------------------------------------------------ keys
    # A conversation's keys share one hash tag, so they live in one Redis
    # Cluster slot and the append script may touch them together.
    def _tag(self, tenant_id: str, conversation_id: str) -> str:
        return f"{self.prefix}:{{{tenant_id}:{conversation_id}}}"

    def list_key(self, tenant_id: str, conversation_id: str) -> str:
        return f"{self._tag(tenant_id, conversation_id)}:hist"

    def version_key(self, tenant_id: str, conversation_id: str) -> str:
        return f"{self._tag(tenant_id, conversation_id)}:ver"

    def summary_key(self, tenant_id: str, conversation_id: str) -> str:
        return f"{self._tag(tenant_id, conversation_id)}:sum"

    # --------------------------------------------------------------- health
    def _check(self) -> Redis:
        if self.redis is None:
            raise CacheUnavailableError("cache disabled")
        if not self._backoff.ready():
            raise CacheUnavailableError("redis skipped after a recent failure")
        return self.redis

    def _failed(self, exc: BaseException, what: str) -> None:
        self._backoff.failed()
        log.warning("redis %s failed: %s: %s", what, type(exc).__name__, exc)

    @property
    def stale_count(self) -> int:
        return len(self._stale)

    # ---------------------------------------------------------------- write
    async def append(
        self,
        new_messages: Mapping[ConversationKey, Sequence[MessageDoc]],
        *,
        fresh: Iterable[ConversationKey] = (),
        invalidate: Iterable[ConversationKey] = (),
    ) -> None:
        """Append each conversation's new messages (oldest first) in one pipeline.

        ``fresh`` conversations are known to have no earlier history, so their
        list may be created. ``invalidate`` lists are deleted instead (the
        next read rebuilds them). Raises :class:`CacheUnavailableError` on
        failure, after remembering every touched conversation as stale.
        """
        fresh_set = set(fresh)
        drop = set(invalidate)
        touched = set(new_messages) | drop
        if not touched:
            return
        try:
            redis = self._check()
        except CacheUnavailableError:
            self._remember_stale(touched)
            raise
        stale = set(self._stale)
        try:
            try:
                await self._append_pipeline(redis, new_messages, fresh_set, drop, stale)
            except NoScriptError:  # a restarted Redis has forgotten the script
                await redis.script_load(APPEND_SCRIPT)
                await self._append_pipeline(redis, new_messages, fresh_set, drop, stale)
        except (RedisError, OSError) as exc:
            self._failed(exc, "append")
            self._remember_stale(touched)
            raise CacheUnavailableError(str(exc)) from exc
        self._stale -= stale

    async def _append_pipeline(
        self,
        redis: Redis,
        new_messages: Mapping[ConversationKey, Sequence[MessageDoc]],
        fresh: set[ConversationKey],
        drop: set[ConversationKey],
        stale: set[ConversationKey],
    ) -> None:
        ttl, cap = str(self.history_ttl_s), str(self.history_max)
        async with redis.pipeline(transaction=False) as pipe:
            for tenant, conv in stale | drop:
                pipe.delete(self.list_key(tenant, conv))
            for key, docs in new_messages.items():
                tenant, conv = key
                keys = (self.list_key(tenant, conv), self.version_key(tenant, conv))
                if key in drop or key in stale or not docs:
                    pipe.evalsha(APPEND_SCRIPT_SHA, 2, *keys, "bump", cap, ttl)
                    continue
                payload = [json.dumps(d, ensure_ascii=False, separators=(",", ":"))
                           for d in docs[-self.history_max:]]
                mode = "create" if key in fresh else "extend"
                pipe.evalsha(APPEND_SCRIPT_SHA, 2, *keys, mode, cap, ttl, *payload)
            for tenant, conv in drop - set(new_messages):
                keys = (self.list_key(tenant, conv), self.version_key(tenant, conv))
                pipe.evalsha(APPEND_SCRIPT_SHA, 2, *keys, "bump", cap, ttl)
            await pipe.execute()

    def _remember_stale(self, keys: Iterable[ConversationKey]) -> None:
        if len(self._stale) < STALE_LIMIT:
            self._stale.update(keys)

    # ----------------------------------------------------------------- read
    async def read(self, tenant_id: str, conversation_id: str, n: int) -> list[MessageDoc] | None:
        """The newest ``n`` messages oldest first, or None on a miss."""
        redis = self._check()
        lk = self.list_key(tenant_id, conversation_id)
        try:
            async with redis.pipeline(transaction=False) as pipe:
                pipe.exists(lk)
                pipe.lrange(lk, 0, n - 1)
                exists, raw = await pipe.execute()
        except (RedisError, OSError) as exc:
            self._failed(exc, "read")
            raise CacheUnavailableError(str(exc)) from exc
        if not exists:
            return None
        return [json.loads(r) for r in reversed(raw)]

    async def version(self, tenant_id: str, conversation_id: str) -> bytes | None:
        redis = self._check()
        try:
            v = await redis.get(self.version_key(tenant_id, conversation_id))
            return v.encode() if isinstance(v, str) else v
        except (RedisError, OSError) as exc:
            self._failed(exc, "version")
            raise CacheUnavailableError(str(exc)) from exc

    async def backfill(
        self,
        tenant_id: str,
        conversation_id: str,
        docs: Sequence[MessageDoc],
        seen_version: bytes | None,
    ) -> bool:
        """Rebuild the list from ``docs`` (the newest messages, oldest first)
        unless a write happened since ``seen_version`` was read."""
        redis = self._check()
        lk = self.list_key(tenant_id, conversation_id)
        vk = self.version_key(tenant_id, conversation_id)
        docs = list(docs)[-self.history_max :]
        try:
            async with redis.pipeline(transaction=True) as pipe:
                await pipe.watch(vk)
                if await pipe.get(vk) != seen_version:
                    await pipe.unwatch()  # type: ignore[no-untyped-call]
                    CACHE_BACKFILLS.labels("raced").inc()
                    return False
                pipe.multi()  # type: ignore[no-untyped-call]
                pipe.delete(lk)
                if docs:
                    pipe.lpush(
                        lk,
                        *[json.dumps(d, ensure_ascii=False, separators=(",", ":")) for d in docs],
                    )
                    pipe.expire(lk, self.history_ttl_s)
                await pipe.execute()
        except WatchError:
            CACHE_BACKFILLS.labels("raced").inc()
            return False
        except (RedisError, OSError) as exc:
            self._failed(exc, "backfill")
            CACHE_BACKFILLS.labels("error").inc()
            return False
        CACHE_BACKFILLS.labels("done").inc()
        return True

    # -------------------------------------------------------------- summary
    async def get_summary(self, tenant_id: str, conversation_id: str) -> dict[str, Any] | None:
        redis = self._check()
        try:
            raw = await redis.get(self.summary_key(tenant_id, conversation_id))
        except (RedisError, OSError) as exc:
            self._failed(exc, "summary read")
            raise CacheUnavailableError(str(exc)) from exc
        return None if raw is None else dict(json.loads(raw))

    async def set_summary(
        self, tenant_id: str, conversation_id: str, summary: dict[str, Any]
    ) -> None:
        redis = self._check()
        try:
            await redis.set(
                self.summary_key(tenant_id, conversation_id),
                json.dumps(summary, ensure_ascii=False, default=str),
                ex=self.summary_ttl_s,
            )
        except (RedisError, OSError) as exc:
            self._failed(exc, "summary write")
            raise CacheUnavailableError(str(exc)) from exc
