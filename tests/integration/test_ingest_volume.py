"""5,000 events over 200 conversations, then a replay from offset 0."""

from __future__ import annotations

import json
import random

from aiokafka import AIOKafkaConsumer, TopicPartition

from streams.adapters.redis.conversation_cache import ConversationCache
from tests.integration.conftest import Stack, chat_event, partitions
from tests.support.services import KAFKA_BOOTSTRAP
from tests.support.worker import eventually

CONVERSATIONS, PER_CONVERSATION = 200, 25


def snapshot(stack: Stack) -> list[list[str]]:
    return stack.sql(
        "SELECT id, tenant_id, event_id, conversation_id, user_id, agent_id, role, "
        "COALESCE(name,''), content, created_at, ingested_at FROM conversation_message ORDER BY id"
    )


async def rewind_group(group: str, topic: str) -> None:
    """Commit offset 0 on every partition: the group reprocesses the whole topic."""
    c = AIOKafkaConsumer(
        bootstrap_servers=KAFKA_BOOTSTRAP, group_id=group, enable_auto_commit=False
    )
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in await partitions(topic)]
        c.assign(tps)
        await c.commit({tp: 0 for tp in tps})
    finally:
        await c.stop()


async def test_events_land_once_in_order_and_replays_change_nothing(stack: Stack) -> None:
    rng = random.Random(7)
    convs = [f"conv-{i:03d}" for i in range(CONVERSATIONS)]
    next_i = dict.fromkeys(convs, 0)
    events = []
    while len(events) < CONVERSATIONS * PER_CONVERSATION:
        c = rng.choice([c for c in convs if next_i[c] < PER_CONVERSATION])
        events.append(chat_event(next_i[c], c))
        next_i[c] += 1
    worker = stack.worker().start()
    await stack.produce(events)

    await eventually(lambda: stack.sql("SELECT COUNT(*) FROM conversation_message")[0][0] == "5000",
                     120, "5,000 rows in MySQL")
    rows = stack.sql("SELECT conversation_id, event_id FROM conversation_message ORDER BY id")
    assert len({r[1] for r in rows}) == 5000
    for c in convs:
        expected = [f"t1-{c}-{i}" for i in range(PER_CONVERSATION)]
        assert [r[1] for r in rows if r[0] == c] == expected, c

    redis = stack.redis()
    keys = ConversationCache(None, prefix=stack.name)

    async def cached(c: str) -> list[str]:
        raw = await redis.lrange(keys.list_key("t1", c), 0, -1)
        return [json.loads(x)["event_id"] for x in raw]

    try:
        for c in convs:
            newest_first = [f"t1-{c}-{i}" for i in range(PER_CONVERSATION - 1, -1, -1)]

            async def complete(c: str = c, want: list[str] = newest_first) -> bool:
                return await cached(c) == want

            # Redis is written after MySQL (stage two of a batch): a list may still be
            # one pipeline behind the row count
            await eventually(complete, 30, f"the Redis list of {c}")
            assert 0 < await redis.ttl(keys.list_key("t1", c)) <= 86_400
    finally:
        await redis.aclose()

    before = snapshot(stack)
    await eventually(lambda: stack.group_caught_up(stack.name, [stack.topics["chat"]]),
                     60, "offsets committed")
    worker.stop()

    # replay 1: the same consumer group rewound to offset 0
    await rewind_group(stack.name, stack.topics["chat"])
    again = stack.worker().start()
    await eventually(lambda: stack.group_caught_up(stack.name, [stack.topics["chat"]]),
                     120, "the rewound group to catch up")
    again.stop()
    # replay 2: a brand-new consumer group (and empty table state) from offset 0
    fresh = stack.worker(app_id=f"{stack.name}-replay").start()
    await eventually(lambda: stack.group_caught_up(f"{stack.name}-replay", [stack.topics["chat"]]),
                     120, "the new group to catch up")
    fresh.stop()
    assert snapshot(stack) == before
