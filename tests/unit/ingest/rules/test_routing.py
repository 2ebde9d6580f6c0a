"""Where a chat event goes, and the partition Java's default partitioner picks."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from streams.adapters.kafka.partitioning import home_partitions, java_partition
from streams.ingest.rules.routing import Placement, place
from streams.wire.records import ChatMessage, SessionEnd

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


# Kafka's own test vectors for Utils.murmur2 (signed ints in Java)
@pytest.mark.parametrize(("key", "java"), [
    (b"21", -973932308), (b"foobar", -790332482), (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971), (b"abc", 479470107),
])
def test_the_partition_is_java_s(key: bytes, java: int) -> None:
    for n in (1, 3, 8, 12):
        assert java_partition(key, n) == (java & 0x7FFFFFFF) % n


def test_a_topic_has_a_partition() -> None:
    with pytest.raises(ValueError):
        java_partition(b"k", 0)


def msg(conv: str = "c1", **kw: Any) -> ChatMessage:
    return ChatMessage(event_id="e", type="message", tenant_id="t", user_id="u", agent_id="a",
                       conversation_id=conv, role=kw.pop("role", "user"),
                       content=kw.pop("content", "hi"), created_at=T0, **kw)


def end(conv: str = "c1") -> SessionEnd:
    return SessionEnd(event_id="x", type="session_end", tenant_id="t", user_id="u",
                      agent_id="a", conversation_id=conv, created_at=T0)


HOME = home_partitions(8)
C1 = HOME("c1")
OTHER = (C1 + 1) % 8
SUB = {"parent_conversation_id": "c1"}

CASES = [
    ("at home", msg(), False, C1, Placement("store")),
    ("an end at home", end(), False, C1, Placement("store")),
    ("elsewhere", msg(), False, OTHER, Placement("rekey", "c1", C1)),
    ("an end elsewhere", end(), False, OTHER, Placement("rekey", "c1", C1)),
    ("sub-agent chat", msg("agent:c1:s", **SUB), False, C1, Placement("rekey", "c1", C1)),
    ("sub-agent tool call", msg("agent:c1:s", role="tool", **SUB), False, C1, Placement("drop")),
    ("re-keyed, now at home", msg(), True, C1, Placement("store")),
    ("re-keyed, elsewhere", msg(), True, OTHER, Placement("refuse")),
    ("sub-agent chat re-keyed", msg("agent:c1:s", **SUB), True, C1,
     Placement("store_in_parent")),
    ("sub-agent chat on the re-key topic elsewhere", msg("agent:c1:s", **SUB), True, OTHER,
     Placement("refuse")),
    ("sub-agent end on the re-key topic", end("agent:c1:s"), True, C1, Placement("refuse")),
]


@pytest.mark.parametrize(("event", "internal", "partition", "want"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_event_is_placed(event: Any, internal: bool, partition: int,
                              want: Placement) -> None:
    assert place(event, internal=internal, partition=partition, home=HOME,
                 rekeyed=internal) == want


def test_an_ordinary_event_written_to_the_rekey_topic_straight_is_refused() -> None:
    assert place(msg(), internal=True, partition=C1, home=HOME) == Placement("refuse")


def test_without_a_home_rule_the_producer_is_trusted() -> None:
    assert place(msg(), internal=False, partition=OTHER, home=None) == Placement("store")
