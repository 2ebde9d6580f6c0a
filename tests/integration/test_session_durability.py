"""Session ends that survive a crash, and sessions that take exactly their messages."""

from __future__ import annotations

import json

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from tests.integration.conftest import Stack, chat_event, partitions, session_end_event
from tests.support.services import KAFKA_BOOTSTRAP
from tests.support.worker import eventually


async def _max_message_bytes(topic: str, value: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=KAFKA_BOOTSTRAP)
    await admin.start()
    try:
        await admin.alter_configs([ConfigResource(
            ConfigResourceType.TOPIC, topic, configs={"max.message.bytes": value})])
    finally:
        await admin.close()


async def _changelog(stack: Stack, key: str) -> list[dict[str, object] | None]:
    """Every value of ``key`` in the sessions table's changelog (None: a tombstone)."""
    topic = f"{stack.name}-sessions-changelog"
    parts = await partitions(topic)
    if not parts:
        return []
    c = AIOKafkaConsumer(bootstrap_servers=KAFKA_BOOTSTRAP, enable_auto_commit=False)
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in parts]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        ends = await c.end_offsets(tps)
        values: list[dict[str, object] | None] = []
        while any([await c.position(tp) < ends[tp] for tp in tps]):
            for records in (await c.getmany(timeout_ms=500)).values():
                for r in records:
                    if r.key is not None and json.loads(r.key) == key:
                        values.append(json.loads(r.value) if r.value else None)
        return values
    finally:
        await c.stop()


async def _changelog_state(stack: Stack, key: str) -> dict[str, object] | None:
    """The newest value of ``key`` in the sessions table's changelog."""
    values = await _changelog(stack, key)
    return values[-1] if values else None


def _run_status(stack: Stack, closed_id: str) -> str | None:
    rows = stack.sql(f"SELECT status FROM consolidation_run WHERE closed_id = '{closed_id}'")
    return rows[0][0] if rows else None


async def test_a_session_end_whose_publish_fails_until_the_worker_dies_is_consolidated(
    stack: Stack,
) -> None:
    worker = stack.worker().start()
    closed_topic = stack.topics["closed"]
    # the closing event cannot be published (the broker rejects it) ...
    await _max_message_bytes(closed_topic, "64")
    await stack.produce([chat_event(0, "c1"), chat_event(1, "c1"),
                         session_end_event("c1")])
    await eventually(lambda: stack.sql("SELECT COUNT(*) FROM conversation_message")[0][0] == "2",
                     60, "the messages stored")
    await eventually(lambda: "session-closed failed" in worker.log_text(), 60,
                     "the publish failing")

    async def state_written() -> bool:
        state = await _changelog_state(stack, "t1/c1")
        return state is not None and state.get("open") is False

    # ... while the state that says "closed" is already in the changelog
    await eventually(state_written, 60, "the closed state in the changelog")
    worker.kill()
    await _max_message_bytes(closed_topic, "1048588")

    stack.worker().start()
    await eventually(lambda: _run_status(stack, "t1/c1#1") == "done", 90,
                     "the session consolidated after the restart")
    ledger = stack.sql("SELECT event_id FROM consolidation_ledger "
                       "WHERE closed_id = 't1/c1#1' ORDER BY message_id")
    assert [r[0] for r in ledger] == ["t1-c1-0", "t1-c1-1"]


async def test_each_session_takes_exactly_its_own_messages(stack: Stack) -> None:
    """Three sessions of one conversation published in one burst (as a replay or a
    worker catching up delivers them): each consolidation takes its own messages."""
    stack.worker().start()
    events = []
    for s in range(3):
        events += [chat_event(10 * s + i, "c1") for i in range(4)]
        events.append(session_end_event("c1", n=s))
    await stack.produce(events)
    for s in (1, 2, 3):
        await eventually(lambda s=s: _run_status(stack, f"t1/c1#{s}") == "done", 90,  # type: ignore[misc]
                         f"session {s} consolidated")
    for s in range(3):
        rows = stack.sql("SELECT event_id, session_seq FROM conversation_message "
                         f"WHERE session_seq = {s + 1} ORDER BY id")
        assert [r[0] for r in rows] == [f"t1-c1-{10 * s + i}" for i in range(4)]
        ledger = stack.sql("SELECT event_id FROM consolidation_ledger "
                           f"WHERE closed_id = 't1/c1#{s + 1}' ORDER BY message_id")
        assert [r[0] for r in ledger] == [f"t1-c1-{10 * s + i}" for i in range(4)]


async def test_a_quiet_closed_conversation_leaves_the_table_and_numbering_goes_on(
    stack: Stack,
) -> None:
    stack.worker(MEMSTREAM_CONSOLIDATION__CLOSED_SESSION_RETENTION_S="2",
                 MEMSTREAM_CONSOLIDATION__IDLE_SCAN_INTERVAL_S="0.5").start()
    await stack.produce([chat_event(0, "c1"), session_end_event("c1", n=0)])
    await eventually(lambda: _run_status(stack, "t1/c1#1") == "done", 60, "session 1")

    async def tombstoned() -> bool:
        values = await _changelog(stack, "t1/c1")
        return bool(values) and values[-1] is None

    await eventually(tombstoned, 60, "a tombstone in the changelog")
    assert stack.sql("SELECT last_closed_seq FROM conversation_session "
                     "WHERE conversation_id = 'c1'") == [["1"]]
    await stack.produce([chat_event(1, "c1"), session_end_event("c1", n=1)])
    await eventually(lambda: _run_status(stack, "t1/c1#2") == "done", 60, "session 2")
    ledger = stack.sql("SELECT event_id FROM consolidation_ledger WHERE closed_id = 't1/c1#2'")
    assert ledger == [["t1-c1-1"]]
