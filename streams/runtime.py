"""Runtime: the worker's shared resources (database engine, Redis, stores,
readers), started once and closed on shutdown. Domain code never reads
settings; the runtime hands it plain values."""

from __future__ import annotations

import asyncio
import logging
from functools import cached_property

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.cache import ConversationCache
from streams.db.engine import create_engine
from streams.db.messages import MessageStore
from streams.db.migrate import upgrade
from streams.domain.tokens import TokenCounter
from streams.history import SessionReader
from streams.settings import Settings

log = logging.getLogger(__name__)


def create_redis(settings: Settings) -> Redis | None:
    if settings.redis.url is None:
        return None
    return Redis.from_url(
        settings.redis.url.get_secret_value(),
        socket_timeout=settings.redis.timeout_s,
        socket_connect_timeout=settings.redis.timeout_s,
        health_check_interval=0,
    )


class Runtime:
    def __init__(self, settings: Settings, *, migrate: bool = True) -> None:
        self.settings = settings
        self.migrate = migrate
        self._lock = asyncio.Lock()
        self._started = False
        self._engine: AsyncEngine | None = None
        self._redis: Redis | None = None

    async def start(self) -> Runtime:
        async with self._lock:
            if self._started:
                return self
            self._engine = create_engine(self.settings.database)
            if self.migrate:
                await upgrade(self._engine)
            self._redis = create_redis(self.settings)
            self._started = True
            return self

    async def stop(self) -> None:
        async with self._lock:
            if self._redis is not None:
                await self._redis.aclose()
            if self._engine is not None:
                await self._engine.dispose()
            self._started = False

    @property
    def engine(self) -> AsyncEngine:
        if self._engine is None:
            raise RuntimeError("runtime not started")
        return self._engine

    @property
    def redis(self) -> Redis | None:
        return self._redis

    @cached_property
    def tokens(self) -> TokenCounter:
        return TokenCounter(self.settings.window.encoding)

    @cached_property
    def store(self) -> MessageStore:
        return MessageStore(self.engine)

    @cached_property
    def cache(self) -> ConversationCache:
        r = self.settings.redis
        return ConversationCache(
            self._redis,
            prefix=r.key_prefix,
            history_max=r.history_max,
            history_ttl_s=r.history_ttl_s,
            summary_ttl_s=r.summary_ttl_s,
            retry_after_s=r.retry_after_s,
        )

    @cached_property
    def reader(self) -> SessionReader:
        w = self.settings.window
        return SessionReader(
            self.store,
            self.cache,
            self.tokens,
            max_token_window=w.max_token_window,
            summary_token_budget=w.summary_token_budget,
            default_last_n=w.default_last_n,
            enforce_alternation=w.enforce_alternation,
        )
