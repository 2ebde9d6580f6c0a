"""The record of answered queries on the real Redis and MariaDB: a Redis that
lost its data still knows, from the database, which requests were answered."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from streams.adapters.db.answered_store import AnsweredStore
from streams.adapters.db.migrate import upgrade
from streams.adapters.redis.answered_record import RedisAnsweredRecord
from streams.query.answered import AnsweredRequests, request_key
from tests.integration.conftest import Stack


def key(reply_topic: str, cid: bytes, tenant: str = "t") -> str:
    return request_key(tenant, reply_topic, None, cid, b'{"message": "hi"}')


async def remembered(answered: AnsweredRequests, k: str) -> None:
    """Both copies of the record written (the database one after the Redis one, as the
    query consumer waits for it before a commit)."""
    if (durable := await answered.remember(k)) is not None:
        await durable


async def test_answered_requests_survive_a_redis_that_lost_its_data(stack: Stack) -> None:
    engine = stack.engine()
    redis = stack.redis()
    try:
        await upgrade(engine)
        store = AnsweredStore(engine)
        quick = RedisAnsweredRecord(redis, prefix=stack.name)
        answered = AnsweredRequests(quick, retry_after_s=0.0, durable=store)
        assert not (await answered.claim(key("replies", b"c-1"))).answered
        await remembered(answered, key("replies", b"c-1"))
        await remembered(answered, key("replies", b"c-1"))  # twice: still one row
        assert (await answered.claim(key("replies", b"c-1"))).answered

        await redis.delete(quick.key(key("replies", b"c-1")))  # Redis restarted empty
        assert (await answered.claim(key("replies", b"c-1"))).answered
        assert not (await answered.claim(key("replies", b"c-1"), maybe_seen=False)).answered
        assert not (await answered.claim(key("replies", b"c-2"))).answered
        assert not (await answered.claim(key("other-replies", b"c-1"))).answered
        assert not (await answered.claim(key("replies", b"c-1", tenant="other"))).answered

        # an attempt's beginning: the first one's is kept, recording the answer drops it
        assert (await answered.claim(key("replies", b"c-3"))).began_ms is None
        first = (await answered.claim(key("replies", b"c-3"))).began_ms
        assert first is not None and abs(first / 1000 - time.time()) < 60
        assert (await answered.claim(key("replies", b"c-3"))).began_ms == first
        await remembered(answered, key("replies", b"c-3"))
        assert not await redis.exists(quick.sending_key(key("replies", b"c-3")))
        assert await redis.ttl(quick.key(key("replies", b"c-3"))) > 60  # longer than callers wait

        assert await store.purge(datetime.now(UTC) - timedelta(minutes=5)) == 0
        assert await store.purge(datetime.now(UTC) + timedelta(seconds=1)) == 2  # c-1 and c-3
        assert not await store.exists(key("replies", b"c-1"))
    finally:
        await redis.aclose()
        await engine.dispose()


async def test_a_take_over_marks_only_a_request_nobody_began_or_answered(stack: Stack) -> None:
    redis = stack.redis()
    try:
        quick = RedisAnsweredRecord(redis, prefix=stack.name)
        owner = AnsweredRequests(quick, retry_after_s=0.0)
        standbys = [AnsweredRequests(quick, retry_after_s=0.0) for _ in range(3)]
        fresh, begun, answered = (key("replies", c) for c in (b"t-1", b"t-2", b"t-3"))
        await owner.claim(begun)
        await owner.claim(answered)
        await owner.remember(answered)

        # of three workers racing for a request nobody began, exactly one takes it over
        assert sorted([await s.take_over(fresh) for s in standbys]) == [False, False, True]
        assert await redis.ttl(quick.sending_key(fresh)) > 60
        assert (await owner.claim(fresh)).began_ms is not None  # its owner sees it began
        assert not await standbys[0].take_over(begun)
        assert not await standbys[0].take_over(answered)
        assert not await redis.exists(quick.sending_key(answered))  # nothing left behind
        # both keys of a request in one Redis Cluster slot: one hash tag
        assert quick.key(fresh).endswith("{" + fresh + "}")
        assert quick.sending_key(fresh).endswith("{" + fresh + "}")
    finally:
        await redis.aclose()
