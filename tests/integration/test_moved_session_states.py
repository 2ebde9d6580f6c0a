"""Session numbers never go backwards when partitions move away and come back
(issue 42, finding 6), on two workers over Kafka and MariaDB.

The first worker closes session 1 of every conversation. A second worker joins
and takes some partitions over; session 2 of every conversation is closed, by
whichever worker holds it, and after the (shortened) retention every state
leaves the table: the last closed session, 2, is remembered in MySQL and a
tombstone goes to the changelog. Compaction then forgets the changelog's
records (done here by deleting them, as compaction would once the tombstones
passed ``delete.retention.ms``). The second worker leaves: its partitions come
back to the first one, whose table must not hold the states it wrote there
before they moved. Every conversation's next session is number 3 — no closing
event reuses the id of one already consolidated.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from tests.integration.conftest import (
    KAFKA_BOOTSTRAP,
    Stack,
    chat_event,
    partitions,
    session_end_event,
)
from tests.support.worker import eventually

pytestmark = pytest.mark.integration
CONVERSATIONS = [f"c{n}" for n in range(8)]
RETENTION_S = 45


def remembered(stack: Stack) -> dict[str, int]:
    rows = stack.sql("SELECT conversation_id, last_closed_seq FROM conversation_session")
    return {r[0]: int(r[1]) for r in rows}


async def closed_ids(stack: Stack, expect: int) -> Counter[str]:
    records = await stack.read_topic(stack.topics["closed"], expect=expect, timeout=60)
    return Counter(json.loads(r.value)["closed_id"] for r in records)


async def forget_changelog(stack: Stack) -> None:
    """What compaction leaves of a changelog whose every key ends in a tombstone."""
    topic = f"{stack.name}-sessions-changelog"
    admin = AIOKafkaAdminClient(bootstrap_servers=KAFKA_BOOTSTRAP)
    await admin.start()
    try:
        tps = [TopicPartition(topic, p) for p in await partitions(topic)]
        c = AIOKafkaConsumer(bootstrap_servers=KAFKA_BOOTSTRAP)
        await c.start()
        try:
            ends = await c.end_offsets(tps)
        finally:
            await c.stop()
        # a compacted-only topic refuses DeleteRecords: deletion allowed for the moment
        await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                  {"cleanup.policy": "compact,delete"})])
        await asyncio.sleep(1)
        await admin.delete_records({tp: RecordsToDelete(ends[tp]) for tp in tps})
        await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                  {"cleanup.policy": "compact"})])
    finally:
        await admin.close()


def session(n: int, conv: str) -> list[dict[str, object]]:
    return [chat_event(n, conv, content=f"{conv} session {n}",
                       created_at=f"2026-11-30T{8 + n:02d}:00:00Z"),
            session_end_event(conv, n=n, created_at=f"2026-11-30T{8 + n:02d}:00:30Z")]


async def test_a_partition_coming_back_brings_no_stale_session_state(stack: Stack) -> None:
    stack.extra_env.update({
        "MEMSTREAM_CONSOLIDATION__CLOSED_SESSION_RETENTION_S": str(RETENTION_S),
        "MEMSTREAM_CONSOLIDATION__IDLE_SCAN_INTERVAL_S": "0.5",
    })
    first = stack.worker().start()
    await stack.produce([e for c in CONVERSATIONS for e in session(1, c)])
    assert set(await closed_ids(stack, len(CONVERSATIONS))) == {f"t1/{c}#1" for c in CONVERSATIONS}

    second = stack.worker().start()
    await asyncio.sleep(5)  # the assignment settled: some partitions moved to it
    await stack.produce([e for c in CONVERSATIONS for e in session(2, c)])
    ids = await closed_ids(stack, 2 * len(CONVERSATIONS))
    assert ids == Counter({f"t1/{c}#{n}": 1 for c in CONVERSATIONS for n in (1, 2)})

    await eventually(lambda: remembered(stack) == {c: 2 for c in CONVERSATIONS},
                     RETENTION_S + 60, "every state left the table after the retention")
    await forget_changelog(stack)

    second.stop()
    await asyncio.sleep(8)  # the partitions back on the first worker, recovered
    await stack.produce([e for c in CONVERSATIONS for e in session(3, c)])
    ids = await closed_ids(stack, 3 * len(CONVERSATIONS))
    assert ids == Counter({f"t1/{c}#{n}": 1 for c in CONVERSATIONS for n in (1, 2, 3)}), ids
    assert first.alive
