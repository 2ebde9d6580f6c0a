"""What the query consumer does not answer: a request whose caller has given up,
and a redelivered request that was answered before (its group rewound, as after
a crash between the reply and the commit). With Redis gone, it answers."""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer, TopicPartition

from tests.integration.conftest import Stack
from tests.integration.query_support import (
    QUERY_ENV,
    QueryTraffic,
    metric,
    query_body,
    query_partitions,
)
from tests.support.services import KAFKA_BOOTSTRAP, free_port
from tests.support.worker import eventually


async def test_a_request_older_than_its_timeout_is_not_answered_and_is_counted(
        stack: Stack) -> None:
    worker = await asyncio.to_thread(stack.worker(**QUERY_ENV).start)
    await eventually(lambda: bool(query_partitions(worker)), 60, "the query consumer")
    async with QueryTraffic(stack) as traffic:
        produced = int(time.time() * 1000) - 10_000  # ten seconds ago
        # the late and the fresh one differ in age only; 3 s leaves room for a busy machine
        late = await traffic.send(0, body=query_body(3000), timestamp_ms=produced)
        patient = await traffic.send(0, body=query_body(20_000), timestamp_ms=produced)
        fresh = await traffic.send(0, body=query_body(3000))
        # same partition, in order: once the fresh one is answered, all three were seen
        await eventually(lambda: bool(traffic.sent[fresh].replies), 30, "the fresh reply")
        await asyncio.sleep(1)
        assert traffic.sent[late].replies == []
        assert len(traffic.sent[patient].replies) == 1  # its caller still waits
        assert metric(worker, "memstream_query_expired_total") == 1.0


async def rewind(group: str, topic: str, partitions: int) -> None:
    """Set the (empty) group's committed offsets back to the start."""
    c = AIOKafkaConsumer(bootstrap_servers=KAFKA_BOOTSTRAP, group_id=group,
                         enable_auto_commit=False)
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        await c.commit({tp: 0 for tp in tps})
    finally:
        await c.stop()


async def test_a_redelivered_request_that_was_answered_is_not_answered_again(
        stack: Stack) -> None:
    every = range(stack.partitions)
    first = await asyncio.to_thread(stack.worker(**QUERY_ENV).start)
    await eventually(lambda: bool(query_partitions(first)), 60, "the query consumer")
    async with QueryTraffic(stack, timeout_ms=60_000) as traffic:
        before = [await traffic.send(p) for p in every]
        await eventually(lambda: not traffic.unanswered(), 30, "every request answered")
        await asyncio.to_thread(first.stop)
        await rewind(f"{stack.name}-query", stack.topics["queries"], stack.partitions)

        second = await asyncio.to_thread(stack.worker(**QUERY_ENV).start)
        await eventually(lambda: bool(query_partitions(second)), 60, "the query consumer")
        after = [await traffic.send(p) for p in every]
        await eventually(lambda: not traffic.unanswered(), 30, "the new requests answered")
        await asyncio.sleep(1)
        assert [len(traffic.sent[c].replies) for c in before + after] == [1] * 8
        assert metric(second, "memstream_query_duplicates_total") == 4.0


async def test_with_redis_unreachable_requests_are_still_answered(stack: Stack) -> None:
    stack.redis_url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    worker = await asyncio.to_thread(stack.worker(**QUERY_ENV).start)
    await eventually(lambda: bool(query_partitions(worker)), 60, "the query consumer")
    async with QueryTraffic(stack) as traffic:
        for p in range(stack.partitions):
            await traffic.send(p)
        await eventually(lambda: not traffic.unanswered(), 30, "every request answered")
        assert traffic.answered_twice() == []
