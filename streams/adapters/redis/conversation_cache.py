"""ConversationCache: the hot copy of each conversation's newest messages in Redis.

One list per conversation, newest message at index 0, capped at
``history_max`` and expiring ``history_ttl_s`` after the last write, with a set
of the event ids it holds beside it (:mod:`streams.adapters.redis.cache_scripts`), so a list
never holds an event twice. Redis is a cache that may fail; the database is
the truth. The rules that keep the cache from ever serving a partial history:

* The worker creates a list only for a conversation it knows is new; for any
  other conversation it appends only to a list that exists. A missing list is
  a miss, and a read rebuilds it from the database.
* Every write bumps a per-conversation version; a rebuild is a ``WATCH``ed
  transaction on that version, so a rebuild racing a write is abandoned.
* Lists the caller names in ``invalidate`` are deleted instead of appended to:
  conversations whose events were already stored (a redelivery) and stale
  ones (a write to them failed earlier; see :mod:`streams.session.stale`).
* A list whose id set is missing or out of step is dropped by the next write
  and is a miss for a read.
* After a failure Redis is skipped for ``retry_after_s`` so a dead cache costs
  no timeout per batch.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import NoScriptError, RedisError, WatchError

from streams.adapters.redis.cache_scripts import APPEND_SCRIPT, APPEND_SCRIPT_SHA
from streams.backoff import FailureBackoff
from streams.metrics import CACHE_BACKFILLS, CACHE_UNINDEXED_DROPS
from streams.session.model import ConversationKey, MessageDoc
from streams.stores import CacheUnavailable

log = logging.getLogger(__name__)



def _encode(doc: MessageDoc) -> str:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def _unique(docs: Iterable[MessageDoc]) -> list[MessageDoc]:
    """``docs`` without repeated event ids (the first of each stays)."""
    seen: set[str] = set()
    out = []
    for d in docs:
        if d["event_id"] not in seen:
            seen.add(d["event_id"])
            out.append(d)
    return out


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

    def ids_key(self, tenant_id: str, conversation_id: str) -> str:
        """The sorted set of the event ids in the list."""
        return f"{self._tag(tenant_id, conversation_id)}:ids"

    def summary_key(self, tenant_id: str, conversation_id: str) -> str:
        return f"{self._tag(tenant_id, conversation_id)}:sum"

    def _history_keys(self, key: ConversationKey) -> tuple[str, str, str]:
        """The append script's KEYS: list, version, ids."""
        return self.list_key(*key), self.version_key(*key), self.ids_key(*key)

    # --------------------------------------------------------------- health
    def _check(self) -> Redis:
        if self.redis is None:
            raise CacheUnavailable("cache disabled")
        if not self._backoff.ready():
            raise CacheUnavailable("redis skipped after a recent failure")
        return self.redis

    def _failed(self, exc: BaseException, what: str) -> None:
        self._backoff.failed()
        log.warning("redis %s failed: %s: %s", what, type(exc).__name__, exc)

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
        next read rebuilds them). An event already in a list is not pushed
        again. Raises :class:`CacheUnavailable` on failure or while Redis
        is skipped; the caller decides what the failure means.
        """
        drop = set(invalidate)
        touched = set(new_messages) | drop
        if not touched:
            return
        redis = self._check()
        fresh_set = set(fresh)
        try:
            try:
                pushed = await self._append_pipeline(redis, new_messages, fresh_set, drop)
            except NoScriptError:  # a restarted Redis has forgotten the script
                await redis.script_load(APPEND_SCRIPT)
                pushed = await self._append_pipeline(redis, new_messages, fresh_set, drop)
        except (RedisError, OSError) as exc:
            self._failed(exc, "append")
            raise CacheUnavailable(str(exc)) from exc
        unindexed = sum(1 for n in pushed if n == -1)
        if unindexed:
            CACHE_UNINDEXED_DROPS.inc(unindexed)

    async def _append_pipeline(
        self,
        redis: Redis,
        new_messages: Mapping[ConversationKey, Sequence[MessageDoc]],
        fresh: set[ConversationKey],
        drop: set[ConversationKey],
    ) -> list[int]:
        ttl, cap = str(self.history_ttl_s), str(self.history_max)
        async with redis.pipeline(transaction=False) as pipe:
            for key in drop:
                pipe.evalsha(APPEND_SCRIPT_SHA, 3, *self._history_keys(key), "drop", cap, ttl, 0)
            for key, docs in new_messages.items():
                if key in drop:
                    continue
                recent = docs[-self.history_max:]
                mode = "create" if key in fresh else "extend"
                pipe.evalsha(APPEND_SCRIPT_SHA, 3, *self._history_keys(key), mode, cap, ttl,
                             len(recent), *[d["event_id"] for d in recent],
                             *[_encode(d) for d in recent])
            return [int(n) for n in await pipe.execute()]

    # ----------------------------------------------------------------- read
    async def read(self, tenant_id: str, conversation_id: str, n: int) -> list[MessageDoc] | None:
        """The newest ``n`` messages oldest first, or None on a miss (no list,
        or a list whose id set is missing or out of step)."""
        redis = self._check()
        lk = self.list_key(tenant_id, conversation_id)
        try:
            async with redis.pipeline(transaction=False) as pipe:
                pipe.llen(lk)
                pipe.zcard(self.ids_key(tenant_id, conversation_id))
                pipe.lrange(lk, 0, n - 1)
                length, indexed, raw = await pipe.execute()
        except (RedisError, OSError) as exc:
            self._failed(exc, "read")
            raise CacheUnavailable(str(exc)) from exc
        if not length or indexed != length:
            return None
        return [json.loads(r) for r in reversed(raw)]

    async def version(self, tenant_id: str, conversation_id: str) -> bytes | None:
        redis = self._check()
        try:
            v = await redis.get(self.version_key(tenant_id, conversation_id))
            return v.encode() if isinstance(v, str) else v
        except (RedisError, OSError) as exc:
            self._failed(exc, "version")
            raise CacheUnavailable(str(exc)) from exc

    async def backfill(
        self,
        tenant_id: str,
        conversation_id: str,
        docs: Sequence[MessageDoc],
        seen_version: bytes | None,
    ) -> bool:
        """Rebuild the list and its id set from ``docs`` (the newest messages,
        oldest first) unless a write happened since ``seen_version`` was read."""
        redis = self._check()
        lk = self.list_key(tenant_id, conversation_id)
        ik = self.ids_key(tenant_id, conversation_id)
        vk = self.version_key(tenant_id, conversation_id)
        docs = _unique(docs)[-self.history_max :]
        try:
            async with redis.pipeline(transaction=True) as pipe:
                await pipe.watch(vk)
                if await pipe.get(vk) != seen_version:
                    await pipe.unwatch()  # type: ignore[no-untyped-call]
                    CACHE_BACKFILLS.labels("raced").inc()
                    return False
                pipe.multi()  # type: ignore[no-untyped-call]
                pipe.delete(lk, ik)
                if docs:
                    pipe.lpush(lk, *[_encode(d) for d in docs])
                    pipe.zadd(ik, {d["event_id"]: i for i, d in enumerate(docs, 1)})
                    pipe.expire(lk, self.history_ttl_s)
                    pipe.expire(ik, self.history_ttl_s)
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
            raise CacheUnavailable(str(exc)) from exc
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
            raise CacheUnavailable(str(exc)) from exc

    # ------------------------------------------------------------- erasure
    def conversation_keys(self, key: ConversationKey) -> list[str]:
        """Every key memstream keeps for one conversation."""
        return [*self._history_keys(key), self.summary_key(*key)]

    async def forget(self, conversations: Iterable[ConversationKey]) -> int:
        """Delete every key of ``conversations``; how many there were. One DEL per
        conversation (its keys share a hash tag, so this works on Redis Cluster too).
        Never skipped after a recent failure, as reads and writes are: an erasure must
        reach Redis. Raises :class:`CacheUnavailable` when Redis fails."""
        redis = self.redis
        keys = list(conversations)
        if redis is None or not keys:
            return 0
        try:
            n = 0
            for i in range(0, len(keys), 500):
                async with redis.pipeline(transaction=False) as pipe:
                    for key in keys[i: i + 500]:
                        pipe.delete(*self.conversation_keys(key))
                    n += sum(int(x) for x in await pipe.execute())
            return n
        except (RedisError, OSError) as exc:
            raise CacheUnavailable(f"redis erase failed: {exc}") from exc

    async def count(self, conversations: Iterable[ConversationKey]) -> int:
        """How many keys of ``conversations`` exist (what :meth:`forget` would delete)."""
        redis = self.redis
        keys = list(conversations)
        if redis is None or not keys:
            return 0
        try:
            async with redis.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.exists(*self.conversation_keys(key))
                return sum(int(x) for x in await pipe.execute())
        except (RedisError, OSError) as exc:
            raise CacheUnavailable(f"redis count failed: {exc}") from exc

    def tenant_pattern(self, tenant_id: str) -> str:
        """The SCAN pattern of every conversation key of ``tenant_id`` (tenant ids hold
        no ``:``, so ``t1`` does not match ``t10``)."""
        return f"{_glob_escape(self.prefix)}:{{{_glob_escape(tenant_id)}:*"

    async def forget_tenant(self, tenant_id: str, *, dry_run: bool = False) -> int:
        """Delete (or count) every conversation key of ``tenant_id``."""
        redis = self.redis
        if redis is None:
            return 0
        n = 0
        try:
            batch: list[str | bytes] = []
            async for key in redis.scan_iter(match=self.tenant_pattern(tenant_id), count=1000):
                batch.append(key)
                if len(batch) >= 500:
                    n += len(batch) if dry_run else await self._delete_each(redis, batch)
                    batch = []
            if batch:
                n += len(batch) if dry_run else await self._delete_each(redis, batch)
            return n
        except (RedisError, OSError) as exc:
            raise CacheUnavailable(f"redis erase failed: {exc}") from exc

    @staticmethod
    async def _delete_each(redis: Redis, keys: list[str | bytes]) -> int:
        async with redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.delete(key)
            return sum(int(x) for x in await pipe.execute())


def _glob_escape(text: str) -> str:
    """``text`` matched literally by a Redis glob pattern."""
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)
