"""A worker killed between the broker's acknowledgement of a reply and the
record of it, on the real Kafka and Redis: the next owner of the request finds
the reply in the reply topic and does not answer again; a reply that never
reached the broker is sent."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from redis.asyncio import Redis

from streams.adapters.kafka.replies import ReplyPublisher
from streams.adapters.kafka.reply_lookup import AT_ONCE, ReplyLookup
from streams.adapters.redis.answered_record import RedisAnsweredRecord
from streams.query.answered import AnsweredRequests, request_key
from streams.query.answering import QueryAnswering
from streams.query.processor import QueryProcessor
from streams.settings import KafkaSettings
from streams.testing.query import EchoLookup
from streams.wire.envelope import Outgoing, SourceRecord, ToSend
from streams.wire.spring_reply import request_headers
from tests.agents.fakes import FakePublisher
from tests.integration.conftest import Stack, create_topic
from tests.support.services import KAFKA_BROKER


@dataclass
class Parts:
    topic: str
    redis: Redis
    replies: ReplyPublisher
    lookup: ReplyLookup

    def worker(self) -> tuple[QueryAnswering, EchoLookup, AnsweredRequests]:
        """One worker's answering, on the shared Redis, Kafka and reply topic."""
        engine = EchoLookup()
        answered = AnsweredRequests(RedisAnsweredRecord(self.redis, prefix=self.topic),
                                    retry_after_s=0.0)
        processor = QueryProcessor(engine, "dlq")
        return (QueryAnswering(processor, self.replies, FakePublisher(), answered,
                               retry_initial_s=0.01, retry_max_s=0.01,
                               sent_replies=self.lookup), engine, answered)


@pytest.fixture
async def parts(stack: Stack) -> AsyncIterator[Parts]:
    topic = f"{stack.name}.replies"
    await create_topic(topic, 3)
    redis = stack.redis()
    # the default: an unaddressed reply goes to every partition of its topic
    replies = ReplyPublisher(KAFKA_BROKER, every_partition=True)
    lookup = ReplyLookup(KafkaSettings(broker=KAFKA_BROKER), every_partition=True)
    try:
        yield Parts(topic, redis, replies, lookup)
    finally:
        await lookup.close()
        await replies.stop()
        await redis.aclose()


def request(topic: str, n: int, offset: int) -> SourceRecord:
    doc = {"request_id": f"q{n}", "tenant_id": "t", "user_id": f"u{n}", "agent_id": "a",
           "message": "hi", "options": {"timeout_ms": 60_000}}
    return SourceRecord("queries", 0, offset, f"t/u{n}".encode(), json.dumps(doc).encode(),
                        request_headers(topic, f"c-{n}".encode()), timestamp=time.time())


def key_of(topic: str, n: int) -> str:
    """The answered record's key of :func:`request` ``(topic, n, ...)``."""
    rec = request(topic, n, 0)
    return request_key("t", topic, None, f"c-{n}".encode(), rec.value or b"")


async def replies_to(stack: Stack, topic: str) -> list[str]:
    return sorted(json.loads(r.value)["request_id"] for r in
                  await stack.read_topic(topic, timeout=3))


async def test_a_reply_sent_by_a_killed_worker_is_not_sent_again(
        stack: Stack, parts: Parts) -> None:
    killed, _, killed_record = parts.worker()
    for n in range(6):  # other replies around it, in every partition
        await killed(request(parts.topic, n, n))
    # q10: killed after the broker took the reply, before the record
    await killed_record.claim(key_of(parts.topic, 10))
    answer = await killed.processor.handle(request(parts.topic, 10, 10))
    assert isinstance(answer, ToSend) and await parts.replies.deliver(answer.records[0])
    # q11: killed while answering, before the reply was sent
    await killed_record.claim(key_of(parts.topic, 11))

    survivor, engine, _ = parts.worker()
    for n in (10, 11, 3):  # delivered again to the next owner
        await survivor(request(parts.topic, n, 20 + n))
    assert [q.request_id for q in engine.asked] == ["q11"]
    assert await replies_to(stack, parts.topic) == sorted(  # a copy in each partition
        [f"q{n}" for n in range(6)] * 3 + ["q10", "q11"] * 3)
    # both recorded now: delivered once more, nothing is looked up or sent
    again, engine, _ = parts.worker()
    for n in (10, 11):
        await again(request(parts.topic, n, 40 + n))
    assert engine.asked == []


async def test_a_lookup_in_a_topic_that_cannot_be_read_says_it_does_not_know(
        parts: Parts) -> None:
    lookup = ReplyLookup(KafkaSettings(broker="127.0.0.1:1"), timeout_s=1.0)
    assert await lookup.sent(parts.topic, b"c-1", int(time.time() * 1000)) is None
    assert await parts.lookup.sent(parts.topic, b"c-1", int(time.time() * 1000)) is False
    assert await parts.lookup.sent("no-such-topic-here", b"c-1", 0) is False


async def test_a_reply_to_every_partition_counts_as_sent_only_when_every_copy_is_there(
        parts: Parts) -> None:
    """Replies with no partition go to every partition by default: a worker killed
    between the copies left some partitions without one, and a caller reading
    those would get nothing, so the reply is sent again."""
    since = int(time.time() * 1000)
    producer = ReplyPublisher(KAFKA_BROKER, every_partition=False)
    try:
        for p in (0, 1):  # partition 2's copy never went out
            assert await producer.deliver(Outgoing(parts.topic, b"k", b"{}",
                                                   request_headers(parts.topic, b"c-7")[1:], p))
        assert await producer.deliver(Outgoing(parts.topic, b"k", b"{}",
                                               request_headers(parts.topic, b"c-8")[1:], 2))
    finally:
        await producer.stop()
    settings = KafkaSettings(broker=KAFKA_BROKER)
    every = ReplyLookup(settings, every_partition=True)
    by_key = ReplyLookup(settings, every_partition=False)
    assert await every.sent(parts.topic, b"c-7", since) is False
    assert await by_key.sent(parts.topic, b"c-7", since) is True
    assert await every.sent(parts.topic, b"c-7", since, partition=1) is True  # addressed
    assert await every.sent(parts.topic, b"c-7", since, partition=2) is False
    assert await by_key.sent(parts.topic, b"c-8", since) is True
    assert await every.sent(parts.topic, b"c-9", since) is False
    await every.close()
    await by_key.close()


async def test_lookups_keep_their_clients_and_close_stops_them(parts: Parts) -> None:
    """A lookup runs while a caller waits: its consumers are started once and kept,
    paused between lookups, not started per lookup (each start costs round trips and
    metadata); one cancelled midway gives its consumer up; close stops them all, later
    lookups do not know."""
    since = int(time.time() * 1000)
    producer = ReplyPublisher(KAFKA_BROKER, every_partition=True)
    try:
        assert await producer.deliver(Outgoing(parts.topic, b"k", b"{}",
                                               request_headers(parts.topic, b"c-5")[1:]))
    finally:
        await producer.stop()
    lookup = ReplyLookup(KafkaSettings(broker=KAFKA_BROKER), every_partition=True)
    for _ in range(4):
        assert await lookup.sent(parts.topic, b"c-5", since) is True
        assert await lookup.sent(parts.topic, b"c-6", since) is False
        assert await lookup.sent(parts.topic, b"c-5", since, partition=2) is True
    assert lookup.clients_started == 1  # one consumer, kept
    assert [r.paused() for r in lookup._idle] == [set(lookup._idle[0].assignment())]
    together = await asyncio.gather(*(lookup.sent(parts.topic, b"c-5", since)
                                       for _ in range(AT_ONCE * 2)))
    assert together == [True] * (AT_ONCE * 2) and lookup.clients_started <= AT_ONCE
    before = lookup.clients_started
    cut = asyncio.ensure_future(lookup.sent(parts.topic, b"c-6", since))
    await asyncio.sleep(0.005)
    cut.cancel()
    await asyncio.gather(cut, return_exceptions=True)
    assert await lookup.sent(parts.topic, b"c-5", since) is True
    assert lookup.clients_started <= before + 1
    await lookup.close()
    assert not lookup._idle and not lookup._stopping
    assert await lookup.sent(parts.topic, b"c-5", since) is None
