"""A Redis list never holds an event twice, on the real Redis and MariaDB:
duplicates in one batch, two appenders of the same events at once, and lists
written before the event-id set existed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.messages import MessageStore
from streams.adapters.db.migrate import upgrade
from streams.adapters.db.stale_marks import StaleMarkStore
from streams.adapters.redis.conversation_cache import ConversationCache
from streams.ingest.processor import IngestProcessor
from streams.session.stale import StaleHistories
from streams.testing.outbox import RecordingPublisher
from streams.testing.session import InMemorySessionTable
from streams.wire.envelope import SourceRecord
from tests.integration.conftest import Stack, chat_event, session_reader
from tests.support.wiring import ingest_processor, settings_for_tests

SETTINGS = settings_for_tests(ingest={"retry_initial_s": 0.01, "retry_max_s": 0.05})
KEY = ("t1", "c")


@dataclass
class Writer:
    """What one worker writes with: its own engine, Redis connection and session table."""

    engine: AsyncEngine
    redis: Redis
    cache: ConversationCache
    processor: IngestProcessor


@pytest.fixture
async def writers(stack: Stack) -> AsyncIterator[list[Writer]]:
    out = []
    for _ in range(2):
        engine = stack.engine()
        redis = stack.redis()
        cache = ConversationCache(redis, prefix=stack.name)
        stale = StaleHistories(cache, StaleMarkStore(engine))
        proc = ingest_processor(MessageStore(engine), cache, RecordingPublisher(),
                                InMemorySessionTable(), stale=stale, settings=SETTINGS)
        out.append(Writer(engine, redis, cache, proc))
    await upgrade(out[0].engine)
    yield out
    for w in out:
        await w.redis.aclose()
        await w.engine.dispose()


def records(events: list[dict[str, Any]], start: int = 0) -> list[SourceRecord]:
    return [SourceRecord("chat", 0, start + i, e["conversation_id"].encode(),
                         json.dumps(e).encode()) for i, e in enumerate(events)]


def doc(i: int) -> dict[str, Any]:
    return {"event_id": f"e{i}", "role": "user", "content": f"m{i}",
            "created_at": "2026-11-30T08:00:00Z"}


async def listed(cache: ConversationCache, key: tuple[str, str] = KEY) -> list[str]:
    """Event ids in the list, newest first."""
    assert cache.redis is not None
    raw = await cache.redis.lrange(cache.list_key(*key), 0, -1)
    return [json.loads(r)["event_id"] for r in raw]


async def test_one_batch_with_an_event_twice_holds_it_once(
    stack: Stack, writers: list[Writer]
) -> None:
    w = writers[0]
    events = [chat_event(i, "c") for i in (0, 1, 0, 2, 1, 0)]
    res = await w.processor.process(records(events))
    assert (res.stored, res.duplicates, res.cache_ok) == (3, 3, True)
    assert await listed(w.cache) == ["t1-c-2", "t1-c-1", "t1-c-0"]
    assert int(stack.sql("SELECT COUNT(*) FROM conversation_message")[0][0]) == 3
    # the append itself is idempotent too, whoever calls it
    await w.cache.append({("t1", "d"): [doc(0), doc(1), doc(0), doc(1)]}, fresh=[("t1", "d")])
    await w.cache.append({("t1", "d"): [doc(1), doc(2)]})
    assert await listed(w.cache, ("t1", "d")) == ["e2", "e1", "e0"]


async def test_two_appenders_of_the_same_events_push_each_once(writers: list[Writer]) -> None:
    a, b = writers
    assert a.redis is not None
    await a.cache.append({KEY: [doc(0)]}, fresh=[KEY])
    for start in range(1, 201, 20):  # on two connections, as two workers would
        chunk = [doc(i) for i in range(start, start + 20)]
        await asyncio.gather(a.cache.append({KEY: chunk}), b.cache.append({KEY: chunk}))
    held = await listed(a.cache)
    assert held == [f"e{i}" for i in range(200, 0, -1)]  # the newest 200: e0 trimmed
    ids = await a.redis.zrange(a.cache.ids_key(*KEY), 0, -1)
    assert sorted(i.decode() for i in ids) == sorted(held)  # trimmed in step
    # overlapping, not equal, appends: each event still once
    chunk = [doc(i) for i in range(201, 261)]
    await asyncio.gather(a.cache.append({KEY: chunk}), b.cache.append({KEY: chunk[30:]}),
                         b.cache.append({KEY: chunk[:40]}))
    held = await listed(a.cache)
    assert sorted(held) == sorted(f"e{i}" for i in range(61, 261))
    ids = await a.redis.zrange(a.cache.ids_key(*KEY), 0, -1)
    assert sorted(i.decode() for i in ids) == sorted(held)


async def test_two_workers_storing_the_same_batch_at_once_list_it_once(
    stack: Stack, writers: list[Writer]
) -> None:
    """Both may find the events new in MySQL (the check precedes the insert), or
    one finds them stored and drops the list: either way no event is listed twice."""
    a, b = writers
    for round_ in range(10):
        conv = f"r{round_}"
        events = [chat_event(i, conv) for i in range(10)]
        await asyncio.gather(a.processor.process(records(events)),
                             b.processor.process(records(events)))
        held = await listed(a.cache, ("t1", conv))
        assert held in ([], [f"t1-{conv}-{i}" for i in range(9, -1, -1)]), held
    assert int(stack.sql("SELECT COUNT(*) FROM conversation_message")[0][0]) == 100


async def legacy_list(cache: ConversationCache, key: tuple[str, str], docs: list[dict[str, Any]],
                      ) -> None:
    """A list as the code before the event-id set wrote it (a duplicate included)."""
    assert cache.redis is not None
    await cache.redis.lpush(cache.list_key(*key), *[json.dumps(d) for d in docs])
    await cache.redis.incr(cache.version_key(*key))


async def test_a_list_without_its_id_set_is_rebuilt_on_first_touch(
    stack: Stack, writers: list[Writer]
) -> None:
    w = writers[0]
    events = [chat_event(i, "c") for i in range(6)] + [chat_event(i, "d") for i in range(3)]
    await w.processor.process(records(events))
    assert w.redis is not None
    for key in (KEY, ("t1", "d")):
        await w.redis.delete(w.cache.list_key(*key), w.cache.ids_key(*key))
    stored = [{"event_id": f"t1-c-{i}"} for i in (0, 1, 2, 2, 3)]  # missing 4 and 5, 2 twice
    await legacy_list(w.cache, KEY, stored)
    await legacy_list(w.cache, ("t1", "d"), [{"event_id": f"t1-d-{i}"} for i in range(3)])

    # a read does not serve it: a miss, rebuilt from the database
    async with session_reader(stack) as reader:
        msgs, source = await reader.messages("t1", "c", 50)
        assert source == "database" and [m["event_id"] for m in msgs] == \
            [f"t1-c-{i}" for i in range(6)]
        msgs, source = await reader.messages("t1", "c", 50)
        assert source == "cache" and [m["event_id"] for m in msgs] == \
            [f"t1-c-{i}" for i in range(6)]
    assert await w.redis.zcard(w.cache.ids_key(*KEY)) == 6

    # a write does not append to it: dropped, and the next read rebuilds it
    await w.processor.process(records([chat_event(3, "d")], start=100))
    assert not await w.redis.exists(w.cache.list_key("t1", "d"))
    async with session_reader(stack) as reader:
        msgs, source = await reader.messages("t1", "d", 50)
        assert source == "database" and [m["event_id"] for m in msgs] == \
            [f"t1-d-{i}" for i in range(4)]
        msgs, source = await reader.messages("t1", "d", 50)
        assert source == "cache" and len(msgs) == 4
