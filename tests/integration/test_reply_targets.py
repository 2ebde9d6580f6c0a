"""Replies go only where they belong: a request naming one of memstream's own
topics (or any topic outside ``MEMSTREAM_QUERY__REPLY_TOPICS``) as its reply
topic gets no reply there; it is dead-lettered with the reason and counted."""

from __future__ import annotations

import json

from aiokafka import AIOKafkaProducer

from streams.wire.headers import header
from tests.integration.conftest import Stack
from tests.integration.query_support import QUERY_ENV, metric
from tests.support.services import KAFKA_BOOTSTRAP
from tests.support.worker import eventually

BODY = json.dumps({"tenant_id": "victim", "user_id": "u1", "agent_id": "a1",
                   "message": "where to?", "options": {"include_short_term": False}}).encode()


async def test_no_reply_lands_on_a_topic_outside_the_allow_list(stack: Stack) -> None:
    stack.extra_env.update(QUERY_ENV)
    worker = stack.worker().start()
    t = stack.topics
    allowed = f"{stack.name}.replies"
    refused = [t["agent_config"], t["chat"], t["queries"], t["dlq"],
               f"{stack.name}-sessions-changelog", "__consumer_offsets",
               f"{stack.name}.elsewhere"]
    await stack.produce([b"warm-up"], topic=allowed)
    await stack.produce([b"warm-up"], topic=f"{stack.name}.elsewhere")
    before = {topic: len(await stack.read_topic(topic, timeout=5)) for topic in refused
              if topic != "__consumer_offsets"}
    producer = AIOKafkaProducer(bootstrap_servers=KAFKA_BOOTSTRAP)
    await producer.start()
    try:
        for n, topic in enumerate([*refused, allowed]):
            await producer.send_and_wait(t["queries"], BODY, key=b"victim/a1", headers=[
                ("kafka_replyTopic", topic.encode()), ("kafka_correlationId", f"c{n}".encode())])
    finally:
        await producer.stop()

    # the allowed one is answered (same key, so after the refused ones)
    [reply] = [m for m in await stack.read_topic(allowed, expect=2) if m.value != b"warm-up"]
    assert header(reply.headers, "kafka_correlationId") == f"c{len(refused)}".encode()
    dead = await stack.read_topic(t["dlq"], expect=len(refused), timeout=30)
    assert sorted(header(d.headers, "memstream.error.reason") for d in dead) == [
        b"reply_topic_not_allowed"] * len(refused)
    assert {header(d.headers, "memstream.error.message").decode().rsplit(": ", 1)[1]
            for d in dead} == set(refused)
    assert all(d.value == BODY for d in dead)  # the request as it came, to look into
    ours = {t["dlq"]: len(refused), t["queries"]: len(refused) + 1}  # dead letters, requests
    for topic, count in before.items():  # no reply landed on any of them
        assert len(await stack.read_topic(topic, timeout=5)) == count + ours.get(topic, 0), topic
    await eventually(lambda: metric(worker, 'memstream_dead_letters_total{reason='
                                    '"reply_topic_not_allowed",stage="query"}') == len(refused),
                     10, "the refusals counted")
