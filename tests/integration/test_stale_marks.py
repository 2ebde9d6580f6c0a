"""Stale-history marks on the real MariaDB and Redis: the table the migration
creates, compare-and-clear, and marks honoured by a later process."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from redis.asyncio import Redis
from sqlalchemy import MetaData
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.messages import MessageStore
from streams.adapters.db.migrate import upgrade
from streams.adapters.db.schema.conversation import stale_history_mark
from streams.adapters.db.stale_marks import StaleMarkStore
from streams.adapters.redis.conversation_cache import ConversationCache
from streams.session.model import StaleMark
from streams.session.stale import StaleHistories
from streams.stores import CacheUnavailable
from streams.testing.outbox import RecordingPublisher
from streams.testing.session import InMemorySessionTable
from streams.wire.envelope import SourceRecord
from tests.integration.conftest import Stack, chat_event, session_reader
from tests.support.services import free_port
from tests.support.wiring import ingest_processor, settings_for_tests

NOW = datetime(2026, 12, 4, 9, tzinfo=UTC)
SETTINGS = settings_for_tests(ingest={"retry_initial_s": 0.01, "retry_max_s": 0.05})


@pytest.fixture
async def engine(stack: Stack) -> AsyncIterator[AsyncEngine]:
    e = stack.engine()
    await upgrade(e)
    yield e
    await e.dispose()


async def test_the_migration_creates_the_declared_table(engine: AsyncEngine) -> None:
    mine = MetaData(naming_convention=stale_history_mark.metadata.naming_convention)
    stale_history_mark.to_metadata(mine)

    def diff(conn: Any) -> list[Any]:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        return [d for d in compare_metadata(ctx, mine)
                if d[0] != "remove_table" and (d[0] != "remove_index"
                                               or d[1].table.name in mine.tables)]

    async with engine.connect() as conn:
        assert await conn.run_sync(diff) == []


async def test_marks_are_cleared_only_if_not_marked_again(engine: AsyncEngine) -> None:
    store = StaleMarkStore(engine)
    first = await store.mark([("t", "a"), ("t", "b"), ("T", "a")], NOW)
    again = await store.mark([("t", "b")], NOW)  # b failed again later
    assert first != again
    assert [m.key for m in await store.page(None, 10)] == [("T", "a"), ("t", "a"), ("t", "b")]
    assert [m.key for m in await store.page(("T", "a"), 1)] == [("t", "a")]
    left = await store.clear([StaleMark("t", "a", first), StaleMark("t", "b", first)])
    assert left == {("t", "b"): again}  # the newer mark survives the older clear
    assert await store.get("t", "a") is None
    assert await store.get("T", "a") == StaleMark("T", "a", first)  # tenants are case-sensitive
    assert await store.clear([StaleMark("t", "b", again), StaleMark("T", "a", first)]) == {}
    assert await store.count() == 0


def cache_on(url: str, prefix: str) -> tuple[Redis, ConversationCache]:
    redis = Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
    return redis, ConversationCache(redis, prefix=prefix, retry_after_s=0.0)


def records(events: list[dict[str, Any]], start: int) -> list[SourceRecord]:
    return [SourceRecord("chat", 0, start + i, e["conversation_id"].encode(),
                         json.dumps(e).encode()) for i, e in enumerate(events)]


async def test_a_later_process_drops_a_list_marked_by_an_earlier_one(
    stack: Stack, engine: AsyncEngine
) -> None:
    """Process one stores c's messages 0-4 (cached), then 5-9 while its Redis
    fails, and dies. Process two, with Redis answering, must drop c's list
    rather than append message 10 to it."""
    redis, cache = cache_on(stack.redis_url or "", stack.name)
    dead, dead_cache = cache_on(f"redis://127.0.0.1:{free_port()}/0", stack.name)
    table = InMemorySessionTable()
    try:
        one = ingest_processor(MessageStore(engine), cache, RecordingPublisher(), table,
                               stale=StaleHistories(cache, StaleMarkStore(engine)),
                               settings=SETTINGS)
        await one.process(records([chat_event(i, "c") for i in range(5)], 0))
        one.cache = dead_cache
        one.stale = StaleHistories(dead_cache, StaleMarkStore(engine))
        res = await one.process(records([chat_event(i, "c") for i in range(5, 10)], 5))
        assert not res.cache_ok
        assert [r[0] for r in stack.sql("SELECT conversation_id FROM stale_history_mark")] == ["c"]
        assert await redis.llen(cache.list_key("t1", "c")) == 5  # stale: 5-9 missing


        stale = StaleHistories(cache, StaleMarkStore(engine))
        two = ingest_processor(MessageStore(engine), cache, RecordingPublisher(), table,
                               stale=stale, settings=SETTINGS)
        assert await stale.sync() == 1  # what the worker does before its first batch
        await two.process(records([chat_event(10, "c")], 10))
        assert not await redis.exists(cache.list_key("t1", "c"))  # dropped, not appended to
        assert stack.sql("SELECT COUNT(*) FROM stale_history_mark") == [["0"]]
        async with session_reader(stack) as reader:
            msgs, source = await reader.messages("t1", "c", 50)
            assert source == "database" and len(msgs) == 11
            msgs, source = await reader.messages("t1", "c", 50)
            assert source == "cache" and [m["event_id"] for m in msgs] == \
                [f"t1-c-{i}" for i in range(11)]
    finally:
        await redis.aclose()
        await dead.aclose()


async def stale_copy(redis: Redis, cache: ConversationCache) -> None:
    """c's list and id set holding messages 0-4 only, as the failed writes left them."""
    docs = [{"event_id": f"t1-c-{i}", "role": "user", "content": f"c message {i}",
             "created_at": "2026-11-30T08:00:00Z"} for i in range(5)]
    await redis.lpush(cache.list_key("t1", "c"), *[json.dumps(d) for d in docs])
    await redis.zadd(cache.ids_key("t1", "c"), {d["event_id"]: i for i, d in enumerate(docs, 1)})


async def test_the_reader_rebuilds_a_marked_list_and_clears_the_mark(
    stack: Stack, engine: AsyncEngine
) -> None:
    redis, cache = cache_on(stack.redis_url or "", stack.name)
    try:
        proc = ingest_processor(MessageStore(engine), cache, RecordingPublisher(),
                                InMemorySessionTable(),
                                stale=StaleHistories(cache, StaleMarkStore(engine)),
                                settings=SETTINGS)
        await proc.process(records([chat_event(i, "c") for i in range(10)], 0))
        await redis.delete(cache.list_key("t1", "c"), cache.ids_key("t1", "c"))
        await stale_copy(redis, cache)
        await StaleMarkStore(engine).mark([("t1", "c")], NOW)
        async with session_reader(stack) as reader:
            msgs, source = await reader.messages("t1", "c", 50)
            assert source == "database" and len(msgs) == 10
            assert stack.sql("SELECT COUNT(*) FROM stale_history_mark") == [["0"]]
            msgs, source = await reader.messages("t1", "c", 50)
            assert source == "cache" and len(msgs) == 10
    finally:
        await redis.aclose()


async def test_a_redis_failure_with_the_database_down_too_is_retried_until_marked(
    stack: Stack, engine: AsyncEngine
) -> None:
    """The mark write fails (no table yet, as with a database that is not
    reachable) and is retried: the cache stage returns only once it is stored."""
    dead, dead_cache = cache_on(f"redis://127.0.0.1:{free_port()}/0", stack.name)
    try:
        stack.sql("RENAME TABLE stale_history_mark TO stale_history_mark_away")
        stale = StaleHistories(dead_cache, StaleMarkStore(engine), retry_initial_s=0.05,
                               retry_max_s=0.1)
        task = asyncio.create_task(stale.write({("t1", "c"): [{"event_id": "e1"}]}, (), ()))
        await asyncio.sleep(0.5)
        assert not task.done()  # the batch is not acknowledged while the mark is not stored
        assert ("t1", "c") in stale.held  # the writer already keeps away from the list
        stack.sql("RENAME TABLE stale_history_mark_away TO stale_history_mark")
        with pytest.raises(CacheUnavailable):
            await asyncio.wait_for(task, 10)
        assert [r[0] for r in stack.sql("SELECT conversation_id FROM stale_history_mark")] == ["c"]
    finally:
        await dead.aclose()
