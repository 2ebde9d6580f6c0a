"""Redis and MariaDB stopped in the middle of the stream."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import Stack, chat_event, session_reader
from tests.support.services import PrivateMariaDB, PrivateRedis, free_port, mysql_cli
from tests.support.worker import eventually


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    r = PrivateRedis(free_port(), tmp_path / "redis")
    r.start()
    yield r
    r.stop()


def count(stack: Stack, database_port: int | None = None) -> int:
    if database_port is None:
        return int(stack.sql("SELECT COUNT(*) FROM conversation_message")[0][0])
    out = mysql_cli("SELECT COUNT(*) FROM conversation_message", port=database_port,
                    database="memstream")
    return int(out.strip())


def batch(start: int, stop: int, convs: int = 20) -> list[dict[str, object]]:
    return [chat_event(i, f"c{n}") for i in range(start, stop) for n in range(convs)]


async def test_redis_down_ingestion_continues_reads_fall_back_and_cache_refills(
    stack: Stack, private_redis: PrivateRedis
) -> None:
    stack.redis_url = private_redis.url
    stack.worker().start()
    await stack.produce(batch(0, 10))
    await eventually(lambda: count(stack) == 200, 60, "first half stored")

    private_redis.stop()
    await stack.produce(batch(10, 20))
    await eventually(lambda: count(stack) == 400, 60, "second half stored while Redis is down")

    async with session_reader(stack, private_redis.url) as reader:
        msgs, source = await reader.messages("t1", "c3", 50)
        assert source == "database"
        assert [m["event_id"] for m in msgs] == [f"t1-c3-{i}" for i in range(20)]

        private_redis.start()  # back, and empty
        await asyncio.sleep(0.1)
        msgs, source = await reader.messages("t1", "c3", 50)
        assert source == "database"  # a miss: read the truth, then rebuild
        msgs, source = await reader.messages("t1", "c3", 50)
        assert source == "cache"
        assert [m["event_id"] for m in msgs] == [f"t1-c3-{i}" for i in range(20)]

    # and the worker writes to the rebuilt list again
    await stack.produce([chat_event(20, "c3")])
    await eventually(lambda: count(stack) == 401, 60, "one more stored")
    async with session_reader(stack, private_redis.url) as reader:
        async def appended() -> bool:
            msgs, source = await reader.messages("t1", "c3", 50)
            return source == "cache" and msgs[-1]["event_id"] == "t1-c3-20" and len(msgs) == 21
        await eventually(appended, 10, "the worker to append to the rebuilt list")


async def test_redis_that_missed_writes_is_never_served_stale(
    stack: Stack, private_redis: PrivateRedis
) -> None:
    """Redis stalls (keys survive) while the worker writes: the stale lists are
    dropped on the next successful write and rebuilt from MySQL on read."""
    stack.redis_url = private_redis.url
    stack.worker().start()
    await stack.produce(batch(0, 5, convs=5))
    await eventually(lambda: count(stack) == 25, 60, "stored")
    admin = Redis.from_url(private_redis.url)
    try:
        await admin.execute_command("CLIENT", "PAUSE", "4000", "WRITE")
        await stack.produce(batch(5, 10, convs=5))
        await eventually(lambda: count(stack) == 50, 60, "stored during the stall")
        await asyncio.sleep(4.5)  # stall over; lists still hold only messages 0-4
        await stack.produce([chat_event(10, "c0")])  # the next write heals
        await eventually(lambda: count(stack) == 51, 60, "stored after the stall")
        await asyncio.sleep(1.0)
        assert "redis append failed" in stack.workers[0].log_text()
        async with session_reader(stack, private_redis.url) as reader:
            for n in range(5):
                msgs, _ = await reader.messages("t1", f"c{n}", 50)
                want = 11 if n == 0 else 10
                assert [m["event_id"] for m in msgs] == [f"t1-c{n}-{i}" for i in range(want)], n
    finally:
        await admin.aclose()


async def test_mariadb_down_then_back_every_event_exactly_once(
    stack: Stack, tmp_path: Path
) -> None:
    db = PrivateMariaDB(free_port(), tmp_path / "mariadb")
    db.start()
    try:
        stack.worker(MEMSTREAM_DATABASE__URL=db.url).start()
        await stack.produce(batch(0, 10))
        await eventually(lambda: count(stack, db.port) == 200, 60, "first half stored")
        db.stop()
        await stack.produce(batch(10, 25))
        await asyncio.sleep(3)  # the worker retries against a dead database meanwhile
        db.start()
        await eventually(lambda: count(stack, db.port) == 500, 120, "everything stored")
        rows = mysql_cli("SELECT event_id FROM conversation_message ORDER BY id",
                         port=db.port, database="memstream").split()
        assert len(rows) == len(set(rows)) == 500
        for n in range(20):
            mine = [r for r in rows if r.startswith(f"t1-c{n}-")]
            assert mine == [f"t1-c{n}-{i}" for i in range(25)]
    finally:
        for w in stack.workers:
            w.kill()
        db.remove()
