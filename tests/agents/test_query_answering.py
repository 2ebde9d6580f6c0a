"""One request to its reply: expired and redelivered requests are not answered,
answered ones are remembered, Redis failures never keep a request unanswered."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from prometheus_client import REGISTRY
from redis.exceptions import ConnectionError as RedisConnectionError

from streams.adapters.kafka.publish import Outgoing, SourceRecord
from streams.query.answered import AnsweredRequests, request_key
from streams.query.answering import QueryAnswering
from streams.query.processor import QueryProcessor
from streams.wire.headers import header
from streams.wire.query import MemoryQuery, MemoryReply
from streams.wire.spring_reply import request_headers
from tests.agents.fakes import FakePublisher

NOW = 1_800_000_000.0


class Engine:
    def __init__(self) -> None:
        self.asked: list[MemoryQuery] = []

    async def answer(self, q: MemoryQuery) -> MemoryReply:
        self.asked.append(q)
        return MemoryReply(request_id=q.request_id, tenant_id=q.tenant_id)


class FakeRedis:
    def __init__(self) -> None:
        self.keys: dict[str, tuple[bytes, int]] = {}
        self.down = False
        self.calls = 0

    def _call(self) -> None:
        self.calls += 1
        if self.down:
            raise RedisConnectionError("connection refused")

    async def exists(self, key: str) -> int:
        self._call()
        return int(key in self.keys)

    async def set(self, key: str, value: bytes, ex: int) -> None:
        self._call()
        self.keys[key] = (value, ex)


class Replies:
    def __init__(self) -> None:
        self.sent: list[Outgoing] = []
        self.fail = False

    async def deliver(self, r: Outgoing) -> bool:
        if self.fail:
            return False
        self.sent.append(r)
        return True


def request(cid: bytes, *, age_s: float = 0.0, timeout_ms: int | None = None,
            headers: list[tuple[str, bytes]] | None = None, value: bytes | None = None,
            offset: int = 0) -> SourceRecord:
    doc: dict[str, Any] = {"request_id": cid.decode(), "tenant_id": "t", "user_id": "u",
                           "agent_id": "a", "message": "hi"}
    if timeout_ms is not None:
        doc["options"] = {"timeout_ms": timeout_ms}
    return SourceRecord("q", 0, offset, b"t/u", value or json.dumps(doc).encode(),
                        request_headers("replies", cid) if headers is None else headers,
                        timestamp=NOW - age_s)


class FakeDurable:
    """The database's copy of the record."""

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.writes: list[list[str]] = []
        self.reads = 0
        self.down = False

    async def add(self, keys: Sequence[str], now: datetime) -> None:
        if self.down:
            raise ConnectionError("database down")
        self.writes.append(list(keys))
        self.keys.update(keys)

    async def exists(self, key: str) -> bool:
        self.reads += 1
        if self.down:
            raise ConnectionError("database down")
        return key in self.keys


def build(redis: FakeRedis | None = None, durable: FakeDurable | None = None,
          maybe_seen: Callable[[SourceRecord], bool] = lambda rec: True,
          ) -> tuple[QueryAnswering, Engine, Replies, FakePublisher, FakeRedis]:
    engine, replies, dlq = Engine(), Replies(), FakePublisher()
    redis = redis or FakeRedis()
    processor = QueryProcessor(engine, "dlq", clock=lambda: NOW)  # type: ignore[arg-type]
    answered = AnsweredRequests(redis, prefix="ms", retry_after_s=10.0,  # type: ignore[arg-type]
                                clock=lambda: NOW, durable=durable, wall_clock=lambda: NOW)
    return (QueryAnswering(processor, replies.deliver, dlq, answered, retry_initial_s=0.01,
                           retry_max_s=0.01, maybe_seen=maybe_seen),
            engine, replies, dlq, redis)


def counter(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


async def test_an_answered_request_is_remembered_and_its_redelivery_not_answered() -> None:
    answering, engine, replies, _, redis = build()
    duplicates = counter("memstream_query_duplicates_total")
    await answering(request(b"c-1"))
    assert len(replies.sent) == 1 and header(replies.sent[0].headers,
                                             "kafka_correlationId") == b"c-1"
    assert redis.keys == {f"ms:answered:replies:{b'c-1'.hex()}": (b"1", 120)}
    await answering(request(b"c-1", offset=1))  # the same request, redelivered
    assert len(replies.sent) == 1 and len(engine.asked) == 1
    assert counter("memstream_query_duplicates_total") == duplicates + 1
    await answering(request(b"c-2", offset=2))
    assert len(replies.sent) == 2


async def test_a_request_older_than_its_timeout_is_counted_and_not_answered() -> None:
    answering, engine, replies, _, redis = build()
    expired = counter("memstream_query_expired_total")
    await answering(request(b"late", age_s=1.5))  # default timeout_ms: 1000
    await answering(request(b"long", age_s=1.5, timeout_ms=2000))
    await answering(request(b"ancient", age_s=3600, timeout_ms=60_000))
    assert [r.request_id for r in engine.asked] == ["long"]
    assert len(replies.sent) == 1
    assert counter("memstream_query_expired_total") == expired + 2
    # a record older than any timeout is skipped without a Redis round trip
    assert redis.calls == 3  # "late": the check; "long": check and remember; "ancient": none


async def test_with_redis_down_every_request_is_answered_and_redis_is_skipped_a_while() -> None:
    redis = FakeRedis()
    redis.down = True
    answering, _, replies, _, _ = build(redis)
    await answering(request(b"a"))
    await answering(request(b"a", offset=1))  # cannot tell it was answered: answered again
    assert len(replies.sent) == 2
    assert redis.calls == 1  # skipped after the failure


async def test_a_lost_reply_is_not_remembered() -> None:
    answering, _, replies, _, redis = build()
    replies.fail = True
    await answering(request(b"lost"))
    assert redis.keys == {}
    replies.fail = False
    await answering(request(b"lost", offset=1))
    assert len(replies.sent) == 1


async def test_a_request_with_no_reply_topic_is_dead_lettered_even_when_the_broker_fails() -> None:
    answering, _, replies, dlq, redis = build()
    dlq.fail_next = 2
    await answering(request(b"x", headers=[]))
    assert replies.sent == [] and len(dlq.on("dlq")) == 1
    assert header(dlq.sent[0].headers, "memstream.error.reason") == b"no_reply_topic"
    assert redis.calls == 0


async def test_a_request_without_correlation_id_is_answered_and_not_remembered() -> None:
    answering, _, replies, _, redis = build()
    await answering(request(b"n", headers=[("kafka_replyTopic", b"replies")]))
    await answering(request(b"n", headers=[("kafka_replyTopic", b"replies")], offset=1))
    assert len(replies.sent) == 2 and redis.calls == 0


async def test_a_redis_that_restarted_empty_forgets_nothing() -> None:
    """The reply is recorded in the database too: delivered again after Redis lost
    its copy, the request is not answered twice."""
    durable = FakeDurable()
    answering, engine, replies, _, redis = build(durable=durable)
    await answering(request(b"c-1"))
    assert durable.keys == {request_key("replies", b"c-1")}
    redis.keys.clear()  # Redis restarted without its data
    await answering(request(b"c-1", offset=1))
    assert len(replies.sent) == 1 and len(engine.asked) == 1


async def test_a_request_new_to_the_group_is_not_looked_up_in_the_database() -> None:
    durable = FakeDurable()
    answering, _, replies, _, _ = build(durable=durable, maybe_seen=lambda rec: False)
    await answering(request(b"c-1"))
    await answering(request(b"c-2", offset=1))
    assert len(replies.sent) == 2 and durable.reads == 0


async def test_requests_completing_together_are_recorded_in_one_write() -> None:
    durable = FakeDurable()
    answering, _, replies, _, _ = build(durable=durable)
    await asyncio.gather(*(answering(request(f"c-{i}".encode(), offset=i)) for i in range(20)))
    assert len(replies.sent) == 20
    assert sum(len(w) for w in durable.writes) == 20 and len(durable.writes) < 20


async def test_with_the_database_down_every_request_is_still_answered() -> None:
    durable = FakeDurable()
    durable.down = True
    answering, _, replies, _, redis = build(redis=FakeRedis(), durable=durable)
    redis.down = True
    await answering(request(b"c-1"))
    await answering(request(b"c-1", offset=1))  # nothing knows it: answered again
    assert len(replies.sent) == 2
