"""/health/live judges each stage on its own: a stuck query stage makes the
worker not live while ingest flows, and a stuck ingest stage while queries flow.

* query: the agent is routed to a MemOS (fake) whose searches hang, so the
  requests stay in flight and uncommitted while chat events are ingested;
* ingest: the message table is locked, so fetched chat events are never stored
  (nor committed) while queries are answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pymysql
import pytest

from tests.fakes.memos import FakeMemOS
from tests.integration.conftest import Stack, chat_event
from tests.integration.query_support import (
    QUERY_ENV,
    QueryTraffic,
    health,
    query_body,
    route_to_memos,
    routed_to_memos,
)
from tests.support.services import MYSQL_PASSWORD, MYSQL_PORT, MYSQL_USER
from tests.support.worker import eventually

pytestmark = pytest.mark.alone  # a flowing stage must progress within its 3 s stall timeout

STALL_TIMEOUT_S = 3.0
HEALTH_ENV = {
    **QUERY_ENV,
    "MEMSTREAM_HEALTH__STALL_TIMEOUT_S": str(STALL_TIMEOUT_S),
    "MEMSTREAM_HEALTH__LAG_INTERVAL_S": "0.25",
    "MEMSTREAM_HEALTH__END_OFFSETS_INTERVAL_S": "1",
}


@asynccontextmanager
async def flowing(work: Callable[[int], Any], every_s: float) -> AsyncIterator[None]:
    """Run ``work(i)`` every ``every_s`` seconds in the background."""
    done = asyncio.Event()

    async def loop() -> None:
        i = 0
        while not done.is_set():
            await work(i)
            i += 1
            await asyncio.sleep(every_s)

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        done.set()
        await task


def stalled(worker: Any, stage: str) -> bool:
    status, body = health(worker, "live")
    return status == 503 and body.get("stalled_stages") == [stage]


async def test_a_stuck_query_stage_is_not_live_while_ingest_flows(stack: Stack) -> None:
    with FakeMemOS() as memos:
        worker = await asyncio.to_thread(stack.worker(
            **HEALTH_ENV, MEMSTREAM_MEMOS__BASE_URL=memos.url, MEMSTREAM_MEMOS__TIMEOUT_S="60",
            MEMSTREAM_CONSOLIDATION__PROVIDER_ATTEMPTS="1").start)
        route_to_memos(worker, "slow")
        async with QueryTraffic(stack) as traffic:
            await eventually(lambda: routed_to_memos(traffic, "slow"), 30,
                             "the agent routed to MemOS")
            await eventually(lambda: health(worker, "live")[0] == 200, 30, "live")

            stored = 0

            async def chat(i: int) -> None:
                nonlocal stored
                await stack.produce([chat_event(i, f"c{i % 4}")])
                stored += 1

            async with flowing(chat, 0.3):
                memos.delay_next(10, 15.0)  # searches hang for 15 s
                waiting = [await traffic.send(p, body=query_body(60_000, agent_id="slow"))
                           for p in (0, 1, 2)]
                await eventually(lambda: stalled(worker, "query"), 3 * STALL_TIMEOUT_S + 15,
                                 "the query stage stalled")
                _, live = health(worker, "live")
                assert live["status"] == "stuck" and "query stage" in live["reason"]
                assert live["stages"]["query"]["lag"] == 3
                assert live["stages"]["ingest"]["stalled_for_s"] < STALL_TIMEOUT_S
                assert live["stages"]["ingest"]["seconds_since_progress"] < STALL_TIMEOUT_S
                # the searches end: answered, committed, live again
                await eventually(lambda: all(traffic.sent[c].replies for c in waiting), 40,
                                 "the slow requests answered")
                await eventually(lambda: health(worker, "live")[0] == 200, 20, "live again")
            assert stored > 10


async def test_a_stuck_ingest_stage_is_not_live_while_queries_flow(stack: Stack) -> None:
    worker = await asyncio.to_thread(stack.worker(**HEALTH_ENV).start)
    await eventually(lambda: health(worker, "ready")[0] == 200, 60, "ready")
    lock = pymysql.connect(host="127.0.0.1", port=MYSQL_PORT, user=MYSQL_USER,
                           password=MYSQL_PASSWORD, database=stack.database, autocommit=True,
                           read_timeout=60, write_timeout=60)
    async with QueryTraffic(stack, timeout_ms=10_000) as traffic:
        async def query(i: int) -> None:
            await traffic.send(i % stack.partitions)

        async with flowing(query, 0.2):
            try:
                with lock.cursor() as cur:
                    cur.execute("SET SESSION lock_wait_timeout = 20")
                    cur.execute("LOCK TABLES conversation_message WRITE")
                await stack.produce([chat_event(i, f"c{i % 4}") for i in range(20)])
                await eventually(lambda: stalled(worker, "ingest"), 3 * STALL_TIMEOUT_S + 15,
                                 "the ingest stage stalled")
                _, live = health(worker, "live")
                assert "ingest stage" in live["reason"] and "query" not in live["reason"]
                assert live["stages"]["ingest"]["lag"] == 20
                assert live["stages"]["query"]["stalled_for_s"] < STALL_TIMEOUT_S
                assert live["stages"]["query"]["seconds_since_progress"] < STALL_TIMEOUT_S
            finally:
                with lock.cursor() as cur:
                    cur.execute("UNLOCK TABLES")
                lock.close()
            await eventually(lambda: health(worker, "live")[0] == 200, 30, "live again")
        await eventually(lambda: not traffic.unanswered(), 30, "every query answered")
        assert len(traffic.sent) >= 10
