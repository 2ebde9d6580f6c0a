"""Chat events from a librdkafka producer (its default partitioner hashes with
CRC32, not murmur2) and with no key at all reach their conversation's state:
the session ends close the sessions, idle closes happen, and nothing is lost."""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka import Producer

from streams.adapters.kafka.partitioning import java_partition
from tests.integration.conftest import Stack, chat_event, session_end_event
from tests.integration.consolidation_support import FAST
from tests.support.services import KAFKA_BOOTSTRAP
from tests.support.worker import eventually

CONVERSATIONS = [f"rk-{n}" for n in range(12)]


def produce_librdkafka(topic: str, docs: list[dict[str, Any]], *, keyed: bool) -> list[int]:
    """Publish with librdkafka's defaults; returns the partitions it chose."""
    partitions: list[int] = []

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        partitions.append(msg.partition())

    # sticky.partitioning.linger.ms 0: each record with no key to a random partition,
    # so a conversation is spread over all of them
    p = Producer({"bootstrap.servers": KAFKA_BOOTSTRAP, "linger.ms": 5,
                  "sticky.partitioning.linger.ms": 0})
    for d in docs:
        p.produce(topic, json.dumps(d).encode(),
                  key=d["conversation_id"].encode() if keyed else None, on_delivery=delivered)
    assert p.flush(30) == 0
    return partitions


def workload() -> list[dict[str, Any]]:
    docs = []
    for conv in CONVERSATIONS:  # 0.1 s apart: well within the 3 s gap in any order
        docs += [chat_event(i, conv, created_at=f"2026-11-30T08:00:00.{i}Z") for i in range(4)]
    # the rest go idle; an end written after its messages
    docs += [session_end_event(conv, created_at="2026-11-30T08:00:00.35Z")
             for conv in CONVERSATIONS[:6]]
    return docs


def consolidated(stack: Stack) -> set[str]:
    return {r[0] for r in stack.sql("SELECT DISTINCT conversation_id FROM consolidation_run "
                                    "WHERE status = 'done'")}


@pytest.mark.parametrize("keyed", [True, False], ids=["librdkafka-default", "null-key"])
async def test_a_conversation_is_sessionized_whatever_the_partitioner(
        stack: Stack, keyed: bool) -> None:
    stack.extra_env.update(FAST)
    # a session goes idle after 8 s of wall clock with nothing of it processed: a
    # pause longer than that (the second worker's rebalance under load) closes it
    # early, and what comes after it joins it with a late closing event, which the
    # exact count below does not expect
    stack.extra_env["MEMSTREAM_CONSOLIDATION__IDLE_TIMEOUT_S"] = "8"
    # two workers: each holds the states of its own partitions only; the events
    # go out once the second one's rebalance is over
    first = stack.worker().start()
    stack.worker().start()
    await eventually(lambda: first.log_text().count("Executing _on_partitions_assigned") >= 2,
                     60, "the first worker's partitions reassigned")
    docs = workload()
    chosen = produce_librdkafka(stack.topics["chat"], docs, keyed=keyed)
    home = [java_partition(d["conversation_id"].encode(), stack.partitions) for d in docs]
    assert sum(a != b for a, b in zip(chosen, home, strict=False)) > len(docs) // 4  # misplaced
    if not keyed:
        assert len(set(chosen)) == stack.partitions
    await eventually(lambda: consolidated(stack) == set(CONVERSATIONS), 90,
                     "every conversation consolidated (six ended, six idle)")
    rows = stack.sql("SELECT conversation_id, session_seq, COUNT(*) FROM conversation_message "
                     "GROUP BY conversation_id, session_seq ORDER BY conversation_id")
    assert sorted(tuple(r) for r in rows) == sorted((c, "1", "4") for c in CONVERSATIONS)
    # a rebalance may hand a closing event on twice, with the same closed_id
    # (consolidation takes each closed_id once)
    closed = list({d["closed_id"]: d for d in (
        json.loads(m.value) for m in
        await stack.read_topic(stack.topics["closed"], expect=len(CONVERSATIONS)))}.values())
    assert {d["conversation_id"] for d in closed} == set(CONVERSATIONS)
    assert {d["session_seq"] for d in closed} == {1}
    # with no key an end may come before some of its messages: they join its
    # session all the same (a late closing event takes them)
    if keyed:  # one partition per conversation, in order: each end closes its session
        triggers = {d["conversation_id"]: d["trigger"] for d in closed}
        assert len(closed) == len(CONVERSATIONS)
        assert {c for c, t in triggers.items() if t == "explicit"} == set(CONVERSATIONS[:6])
        assert {c for c, t in triggers.items() if t == "idle"} == set(CONVERSATIONS[6:])
    assert await stack.read_topic(stack.topics["dlq"], timeout=2) == []
