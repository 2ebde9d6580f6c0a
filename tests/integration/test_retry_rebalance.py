"""A retry held through a provider outage stays one record on ``memory.retry``
however many rebalances pass (issue 42, finding 7), over Kafka and MariaDB.

MemOS fails every add, so the session's closing event goes to the retry topic,
due in ten minutes; the worker's retry agent holds it. A second worker then
joins the group and leaves it, twice: four rebalances, at each of which the
holder lets the retry go. It is let go undone — its offset stays uncommitted
and the partition's next owner reads it again — so the topic still holds the
one record, and the group's commit has not passed it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from tests.fakes.memos import FakeMemOS
from tests.integration.conftest import KAFKA_BOOTSTRAP, Stack, chat_event, session_end_event
from tests.integration.consolidation_support import FAST, run_status, set_agent
from tests.support.worker import eventually

pytestmark = pytest.mark.integration
LET_GO = "waiting retries"
REBALANCES = 4


@pytest.fixture
def memos() -> Iterator[FakeMemOS]:
    with FakeMemOS() as server:
        yield server


async def committed(stack: Stack, tp: TopicPartition) -> int | None:
    admin = AIOKafkaAdminClient(bootstrap_servers=KAFKA_BOOTSTRAP)
    await admin.start()
    try:
        meta = (await admin.list_consumer_group_offsets(stack.name)).get(tp)
        return None if meta is None else meta.offset
    finally:
        await admin.close()


def let_go_count(stack: Stack) -> int:
    return sum(w.log_text().count(LET_GO) for w in stack.workers)


async def test_a_held_retry_stays_one_record_across_rebalances(
        stack: Stack, memos: FakeMemOS) -> None:
    stack.extra_env.update(FAST)
    stack.extra_env.update({
        "MEMSTREAM_MEMOS__BASE_URL": memos.url,
        "MEMSTREAM_CONSOLIDATION__RETRY_ATTEMPTS": "5",
        "MEMSTREAM_CONSOLIDATION__RETRY_BACKOFF_INITIAL_S": "600",
        "MEMSTREAM_CONSOLIDATION__RETRY_BACKOFF_MAX_S": "600",
    })
    set_agent(stack, "t1", "a1", "--provider", "MEMOS", "--open-long-memory", "on",
              "--model", "chat-model")
    memos.fail_always(status=503, path="/product/add")
    first = stack.worker().start()
    await stack.produce([chat_event(0, "c1", content="I live in Oslo."),
                         session_end_event("c1")])
    (retry,) = await stack.read_topic(stack.topics["retry"], expect=1, timeout=60)
    tp = TopicPartition(retry.topic, retry.partition)
    await asyncio.sleep(3)  # read and held by the retry agent

    for n in range(REBALANCES // 2):
        second = stack.worker().start()
        await eventually(lambda n=n: let_go_count(stack) >= 2 * n + 1, 60,  # type: ignore[misc]
                         "the retry let go as the second worker joins")
        await asyncio.sleep(3)  # the assignment settled, the retry held again
        second.stop()
        await eventually(lambda n=n: let_go_count(stack) >= 2 * n + 2, 60,  # type: ignore[misc]
                         "the retry let go as the second worker leaves")
        await asyncio.sleep(3)

    assert first.alive
    records = await stack.read_topic(stack.topics["retry"])
    assert len(records) == 1, f"{len(records)} records on the retry topic"
    offset = await committed(stack, tp)
    assert offset is None or offset <= retry.offset, offset  # read again by its next owner
    assert run_status(stack, "t1/c1#1") != "done"
