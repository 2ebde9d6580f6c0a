"""Requests taken over by a worker that does not hold their partition, against real
workers: one of two is frozen (SIGSTOP: it holds its partitions until its session
times out), and then the query group is made to rebalance while it stays frozen
(an eager rebalance waits for it: no worker holds any partition). Callers that do
not hedge, with 1 s deadlines, are answered in time on every partition, once —
also after the frozen worker wakes and reads the same requests."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
from aiokafka import AIOKafkaConsumer

from tests.integration.conftest import Stack
from tests.integration.query_support import (
    QUERY_ENV,
    QueryTraffic,
    health,
    metric,
    query_partitions,
    two_workers,
)
from tests.support.services import KAFKA_BOOTSTRAP
from tests.support.worker import eventually

pytestmark = pytest.mark.alone  # it times replies against a 1 s deadline

# the frozen worker holds its partitions this long: every request below falls inside
SESSION_S = 20.0
ENV = {**QUERY_ENV, "MEMSTREAM_QUERY__SESSION_TIMEOUT_S": str(SESSION_S)}


def held(worker: object) -> list[int] | None:
    """The query partitions a worker answers now, ready or not (None: no answer)."""
    _, body = health(worker, "ready")
    query = body.get("query")
    return list(query["partitions"]) if isinstance(query, dict) else None


def freeze(worker: object, how: signal.Signals) -> None:
    proc = getattr(worker, "proc")  # noqa: B009 - the worker's process group
    os.killpg(proc.pid, how)


async def ask(traffic: QueryTraffic, partitions: list[int], rounds: int) -> None:
    await traffic.steady(partitions, seconds=rounds / 5, per_s=5)
    await asyncio.sleep(1.5)  # every reply in


async def test_requests_of_a_frozen_worker_and_of_a_stalled_group_are_answered_in_time(
        stack: Stack) -> None:
    frozen, live = await two_workers(stack, ENV)
    theirs = query_partitions(frozen) or []
    ours = query_partitions(live) or []
    async with QueryTraffic(stack, timeout_ms=1000) as traffic:
        freeze(frozen, signal.SIGSTOP)
        try:
            began = time.monotonic()
            await ask(traffic, theirs + ours, rounds=10)
            assert time.monotonic() - began < SESSION_S  # the frozen one held its partitions
            assert query_partitions(live) == ours
            unanswered = traffic.unanswered()
            assert not unanswered, f"{len(unanswered)} of {len(traffic.sent)} not answered"
            assert traffic.max_latency(theirs) < 1.0
            taken = metric(live, 'memstream_query_rescues_total{outcome="taken"}')
            assert taken >= 10 * len(theirs)

            # a member joins: the eager rebalance waits for the frozen worker, nobody
            # holds a partition meanwhile
            joiner = AIOKafkaConsumer(stack.topics["queries"], bootstrap_servers=KAFKA_BOOTSTRAP,
                                      group_id=f"{stack.name}-query", enable_auto_commit=False,
                                      session_timeout_ms=6000, heartbeat_interval_ms=500)
            joining = asyncio.get_running_loop().create_task(joiner.start())  # joined once
            try:  # the rebalance is over
                await eventually(lambda: held(live) == [], 20, "the query group rebalancing")
                stalled = time.monotonic()
                await ask(traffic, theirs + ours, rounds=10)
                assert held(live) == []  # still stalled throughout
                assert time.monotonic() - stalled < SESSION_S
                unanswered = traffic.unanswered()
                assert not unanswered, f"{len(unanswered)} of {len(traffic.sent)} not answered"
                assert traffic.max_latency(theirs + ours) < 1.0
            finally:
                joining.cancel()
                await asyncio.gather(joining, return_exceptions=True)
                await joiner.stop()
        finally:
            freeze(frozen, signal.SIGCONT)
        # the frozen worker wakes, reads the requests it held, and answers none twice
        await eventually(lambda: set(query_partitions(live) or []) | set(
            query_partitions(frozen) or []) == set(range(stack.partitions)), 60,
            "both workers answering again")
        await asyncio.sleep(2)
        assert not traffic.answered_twice(), f"{len(traffic.answered_twice())} answered twice"
        assert traffic.strays == 0
