"""The record of answered queries on the real Redis and MariaDB: a Redis that
lost its data still knows, from the database, which requests were answered."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from streams.adapters.db.answered_store import AnsweredStore
from streams.adapters.db.migrate import upgrade
from streams.query.answered import AnsweredRequests, request_key
from tests.integration.conftest import Stack


async def test_answered_requests_survive_a_redis_that_lost_its_data(stack: Stack) -> None:
    engine = stack.engine()
    redis = stack.redis()
    try:
        await upgrade(engine)
        store = AnsweredStore(engine)
        answered = AnsweredRequests(redis, prefix=stack.name, retry_after_s=0.0, durable=store)
        assert not await answered.answered("replies", b"c-1")
        await answered.remember("replies", b"c-1")
        await answered.remember("replies", b"c-1")  # twice: still one row
        assert await answered.answered("replies", b"c-1")

        await redis.delete(answered.key("replies", b"c-1"))  # Redis restarted empty
        assert await answered.answered("replies", b"c-1")
        assert not await answered.answered("replies", b"c-1", maybe_seen=False)
        assert not await answered.answered("replies", b"c-2")
        assert not await answered.answered("other-replies", b"c-1")

        assert await store.purge(datetime.now(UTC) - timedelta(minutes=5)) == 0
        assert await store.purge(datetime.now(UTC) + timedelta(seconds=1)) == 1
        assert not await store.exists(request_key("replies", b"c-1"))
    finally:
        await redis.aclose()
        await engine.dispose()
