"""A Redis that missed writes, then a worker SIGKILLed and restarted: the
incomplete lists are never served, by any reader, before or after the restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import Stack, chat_event, session_reader
from tests.support.services import PrivateRedis, free_port
from tests.support.worker import eventually

CONVS = 5


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    r = PrivateRedis(free_port(), tmp_path / "redis")
    r.start()
    yield r
    r.stop()


def stored(stack: Stack) -> int:
    return int(stack.sql("SELECT COUNT(*) FROM conversation_message")[0][0])


def batch(start: int, stop: int) -> list[dict[str, object]]:
    return [chat_event(i, f"c{n}") for i in range(start, stop) for n in range(CONVS)]


async def test_lists_that_missed_writes_are_never_served_across_a_kill_and_restart(
    stack: Stack, private_redis: PrivateRedis
) -> None:
    stack.redis_url = private_redis.url
    worker = stack.worker().start()
    admin = Redis.from_url(private_redis.url)
    lists = [f"{stack.name}:{{t1:c{n}}}:hist" for n in range(CONVS)]
    try:
        await stack.produce(batch(0, 5))
        await eventually(lambda: stored(stack) == 25, 60, "first half stored")

        async def cached() -> bool:
            return [await admin.llen(k) for k in lists] == [5] * CONVS
        await eventually(cached, 30, "the lists to hold messages 0-4")

        # writes stall (reads go on); messages 5-9 reach MySQL only
        await admin.execute_command("CLIENT", "PAUSE", "120000", "WRITE")
        await stack.produce(batch(5, 10))
        await eventually(lambda: stored(stack) == 50, 60, "second half stored during the stall")
        await eventually(lambda: stack.group_caught_up(stack.name, [stack.topics["chat"]]), 60,
                         "the stalled batches acknowledged")
        assert "redis append failed" in worker.log_text()
        worker.kill()
        await admin.execute_command("CLIENT", "UNPAUSE")
        assert [await admin.llen(k) for k in lists] == [5] * CONVS  # incomplete, still there

        want = {n: [f"t1-c{n}-{i}" for i in range(10)] for n in range(CONVS)}

        async def never_stale(n: int, expect: list[str]) -> str:
            async with session_reader(stack, private_redis.url) as reader:
                msgs, source = await reader.messages("t1", f"c{n}", 50)
            assert [m["event_id"] for m in msgs] == expect, (n, source)
            return source

        # no worker alive: a reader in another process never serves them
        for n in (0, 1):
            await never_stale(n, want[n])
            assert await never_stale(n, want[n]) == "cache"  # rebuilt from MySQL

        # the restarted worker honours the marks left behind: it drops c2-c4, not appends
        stack.worker().start()
        await stack.produce([chat_event(10, f"c{n}") for n in range(CONVS)])
        await eventually(lambda: stored(stack) == 55, 60, "one more each stored")
        await eventually(lambda: stack.group_caught_up(stack.name, [stack.topics["chat"]]), 60,
                         "message 10 acknowledged (its cache stage done)")
        assert [await admin.llen(k) for k in lists] == [11, 11, 0, 0, 0]
        for n in range(CONVS):
            want[n].append(f"t1-c{n}-10")
            await never_stale(n, want[n])
            assert await never_stale(n, want[n]) == "cache"
    finally:
        await admin.aclose()
