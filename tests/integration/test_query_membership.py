"""Queries flow at a steady rate while a worker joins and another stops
gracefully: each rebalance drains and commits what was answered before letting
go, so every request is answered exactly once.

Answers take a while (the agent's long memory is on a MemOS whose searches take
0.3 s), so requests are in flight at every rebalance; Redis is unreachable, so
the answered-request record cannot help: exactly once is the rebalances' doing.
"""

from __future__ import annotations

import asyncio

from tests.fakes.memos import FakeMemOS
from tests.integration.conftest import Stack
from tests.integration.query_support import (
    QUERY_ENV,
    QueryTraffic,
    query_body,
    query_partitions,
    route_to_memos,
    routed_to_memos,
)
from tests.support.services import free_port
from tests.support.worker import eventually


async def test_a_worker_joining_and_one_leaving_answer_every_request_exactly_once(
        stack: Stack) -> None:
    every = set(range(stack.partitions))
    stack.redis_url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    with FakeMemOS() as memos:
        env = {**QUERY_ENV, "MEMSTREAM_MEMOS__BASE_URL": memos.url,
               "MEMSTREAM_CONSOLIDATION__PROVIDER_ATTEMPTS": "1"}
        first = await asyncio.to_thread(stack.worker(**env).start)
        await eventually(lambda: set(query_partitions(first) or ()) == every, 60,
                         "the first worker")
        route_to_memos(first, "slow")
        async with QueryTraffic(stack, timeout_ms=60_000) as traffic:
            await eventually(lambda: routed_to_memos(traffic, "slow"), 30, "routed to MemOS")
            memos.delay_next(100_000, 0.3)
            done = asyncio.Event()
            flowing = asyncio.create_task(traffic.steady(
                every, seconds=300, per_s=5, until=done, body=query_body(60_000, "slow")))
            try:
                await asyncio.sleep(2)
                second = await asyncio.to_thread(stack.worker(**env).start)  # joins
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
