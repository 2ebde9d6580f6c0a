"""Queries flow at a steady rate while a worker joins and another stops
gracefully: each rebalance drains and commits what was answered before letting
go, so every request is answered exactly once."""

from __future__ import annotations

import asyncio

from tests.integration.conftest import Stack
from tests.integration.query_support import QUERY_ENV, QueryTraffic, query_partitions
from tests.support.worker import eventually


async def test_a_worker_joining_and_one_leaving_answer_every_request_exactly_once(
        stack: Stack) -> None:
    every = set(range(stack.partitions))
    first = await asyncio.to_thread(stack.worker(**QUERY_ENV).start)
    await eventually(lambda: set(query_partitions(first) or ()) == every, 60, "first worker")

    async with QueryTraffic(stack, timeout_ms=60_000) as traffic:
        done = asyncio.Event()
        flowing = asyncio.create_task(traffic.steady(every, seconds=300, per_s=5, until=done))
        try:
            await asyncio.sleep(2)
            second = await asyncio.to_thread(stack.worker(**QUERY_ENV).start)  # joins
            await eventually(lambda: bool(query_partitions(second)), 60, "the second worker")
            await asyncio.sleep(2)
            await asyncio.to_thread(first.stop)  # leaves, gracefully
            await eventually(lambda: set(query_partitions(second) or ()) == every, 60,
                             "the second worker alone")
            await asyncio.sleep(2)
        finally:
            done.set()
            await flowing
        await eventually(lambda: not traffic.unanswered(), 60, "every request answered")
        await asyncio.sleep(2)  # a duplicate would arrive by now

        twice = traffic.answered_twice()
        print(f"{len(traffic.sent)} requests, answered twice: {len(twice)}")
        assert len(traffic.sent) > 100
        assert twice == []
        assert traffic.strays == 0
