"""Every reader of a topic keeps going on records it cannot use: they go to the
dead-letter topic with the reason, and the records around them are processed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pymysql.err as my
import pytest
from sqlalchemy import exc as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.kafka.partitioning import java_partition
from streams.consolidation.retry_scheduler import RetryScheduler
from streams.ingest.processor import IngestProcessor
from streams.query.processor import QueryProcessor
from streams.session.stale import StaleHistories
from streams.testing.ingest import InMemoryMessageStore
from streams.testing.outbox import RecordingPublisher
from streams.testing.session import InMemoryHotCopy, InMemorySessionTable, InMemoryStaleMarks
from streams.wire.envelope import DeadLettered, SourceRecord, ToSend
from streams.wire.headers import NEXT_ATTEMPT_AT, header
from streams.wire.query import MemoryQuery, MemoryReply
from streams.wire.spring_reply import request_headers
from tests.agents.consolidation_harness import Harness
from tests.agents.test_ingest_processor import ev, recs
from tests.support.wiring import ingest_processor, settings_for_tests

SETTINGS = settings_for_tests()
DEEP = b'{"a": ' + b"[" * 1200 + b"]" * 1200 + b"}"


class RefusingStore(InMemoryMessageStore):
    """Refuses, like MySQL, any batch holding a row whose content is ``refuse me``."""

    async def store(self, rows: Sequence[dict[str, Any]]) -> set[tuple[str, str]]:
        if any(r["content"] == "refuse me" for r in rows):
            self.calls += 1
            raise sa.DataError("INSERT …", {}, my.DataError(1406, "Data too long"))
        return await super().store(rows)


@pytest.fixture
def ingest() -> tuple[RefusingStore, InMemoryHotCopy, RecordingPublisher, InMemorySessionTable,
                      IngestProcessor]:
    store, cache = RefusingStore(), InMemoryHotCopy()
    pub, table = RecordingPublisher(), InMemorySessionTable()
    stale = StaleHistories(cache, InMemoryStaleMarks())
    return store, cache, pub, table, ingest_processor(store, cache, pub, table, stale=stale,
                                                      settings=SETTINGS)


def reason(out: Any) -> bytes | None:
    return header(out.headers, "memstream.error.reason")


async def test_a_row_the_database_refuses_is_dead_lettered_and_its_batch_mates_stored(
    ingest: Any,
) -> None:
    store, cache, pub, table, proc = ingest
    batch = recs([ev(0), ev(1), ev(2, content="refuse me"), ev(3), ev(4)])
    res = await proc.process(batch)
    assert [r["event_id"] for r in store.rows] == ["c1-0", "c1-1", "c1-3", "c1-4"]
    assert (res.stored, res.dead_lettered, res.duplicates) == (4, 1, 0)
    (dead,) = pub.on("dlq")
    assert dead.value == batch[2].value and dead.key == batch[2].key
    assert reason(dead) == b"unstorable"
    assert header(dead.headers, "memstream.source.offset") == b"2"
    assert header(dead.headers, "memstream.error.class") == b"DataError"
    message = header(dead.headers, "memstream.error.message") or b""
    assert b"1406" in message and b"refuse me" not in message and b"INSERT" not in message
    assert store.probes == 1
    # the refused message keeps its place in its session (no session number depends
    # on what the database refused), but it is neither stored nor cached
    assert table.data["t1/c1"]["message_count"] == 5
    assert [d["event_id"] for d in cache.lists[("t1", "c1")]] == ["c1-4", "c1-3", "c1-1", "c1-0"]
    again = await proc.process(batch)  # a redelivery: dead-lettered again, nothing doubled
    assert (again.stored, again.duplicates, again.dead_lettered) == (0, 4, 1)


async def test_the_rekey_topic_takes_only_what_ingest_would_send_there() -> None:
    """Sub-agent chat in its parent's home partition, and chat events ingest
    re-keyed there; not the rest (ordinary events written there straight)."""
    store, cache = RefusingStore(), InMemoryHotCopy()
    pub, table = RecordingPublisher(), InMemorySessionTable()
    stale = StaleHistories(cache, InMemoryStaleMarks())
    eight = SETTINGS.model_copy(update={"kafka": SETTINGS.kafka.model_copy(
        update={"partitions": 8})})
    proc = ingest_processor(store, cache, pub, table, stale=stale, settings=eight)
    end = {k: v for k, v in ev(1).items() if k not in {"role", "content"}} | {
        "type": "session_end"}
    sub = {"conversation_id": "agent:c1:x", "parent_conversation_id": "c1"}
    docs: list[dict[str, Any] | bytes] = [
        ev(0, **sub, content="looking"), end, ev(2), ev(3, **sub, role="tool"),
        ev(4, **sub, content="found it")]
    home = java_partition(b"c1", 8)  # where ingest re-keys c1's events to
    res = await proc.process([replace(r, partition=home) for r in recs(docs, topic="sub")])
    assert [reason(d) for d in pub.on("dlq")] == [b"schema"] * 3
    assert [int(header(d.headers, "memstream.source.offset") or -1)
            for d in pub.on("dlq")] == [1, 2, 3]
    assert [(r["event_id"], r["conversation_id"], r["origin_conversation_id"])
            for r in store.rows] == [("c1-0", "c1", "agent:c1:x"),
                                     ("c1-4", "c1", "agent:c1:x")]
    assert res.dead_lettered == 3 and res.closed == []


@pytest.mark.parametrize(("value", "why"), [
    (None, b"undecodable"),
    (DEEP, b"too_deep"),
    (b'{"tenant_id": "t1", "conversation_id": "c1\\ud800", "session_seq": 1, "idle_for_s": 1, '
     b'"checked_at": "2026-11-30T08:00:00Z"}', b"invalid_text"),
    (b'{"tenant_id": "t1", "conversation_id": "c1", "session_seq": 1, "idle_for_s": 1, '
     b'"checked_at": "9999-12-31T23:59:59-01:00"}', b"out_of_range"),
])
async def test_unusable_idle_checks_are_dead_lettered(ingest: Any, value: bytes | None,
                                                      why: bytes) -> None:
    store, cache, pub, table, proc = ingest
    batch = [*recs([ev(0)]), SourceRecord("idle", 0, 5, b"c1", value), *recs([ev(1)], start=1)]
    res = await proc.process(batch)
    (dead,) = pub.on("dlq")
    assert reason(dead) == why and dead.value == value
    assert res.stored == 2


@pytest.mark.parametrize(("value", "why"), [
    (b"\xff", b"undecodable"),
    (DEEP, b"too_deep"),
    (json.dumps({"closed_id": "t1/c1#1", "tenant_id": "t1", "user_id": "u1", "agent_id": "a1",
                 "conversation_id": "c1", "trigger": "idle", "session_seq": 1,
                 "closed_at": "9999-12-31T23:59:59-01:00",
                 "last_activity": "2026-11-30T08:00:00Z", "message_count": 1}).encode(),
     b"out_of_range"),
])
async def test_unusable_closing_events_are_dead_lettered_at_once(
    engine: AsyncEngine, value: bytes, why: bytes
) -> None:
    h = Harness(engine)
    await h.say("c2", [("user", "I live in Rome.")])
    bad = SourceRecord("closed", 0, 1, b"c1", value)
    results = await h.processor.process([bad, h.record(h.closed("c2"), offset=2)])
    assert [r.outcome for r in results] == ["dead_lettered", "done"]
    (dead,) = h.publisher.on("dlq")
    assert reason(dead) == why and dead.value == value and h.publisher.on("retry") == []


async def test_a_retry_due_in_the_far_future_is_held_no_longer_than_the_longest_backoff(
    engine: AsyncEngine,
) -> None:
    h = Harness(engine)  # the router's longest backoff is 4 s
    await h.say("c1", [("user", "I live in Rome.")])
    acked: list[int] = []

    async def ack() -> None:
        acked.append(1)

    sched = RetryScheduler(h.processor, clock=h.clock)
    for when in (b"9999-12-31T23:59:59+00:00", b"9999-12-31T23:59:59-01:00"):
        await sched.admit(h.record(h.closed("c1"), topic="retry",
                             headers=[(NEXT_ATTEMPT_AT, when)]), ack, ack)
    assert await sched.step() == 0
    h.clock.advance(4.0)
    assert await sched.step() == 2
    await sched.drain()
    assert acked == [1, 1] and h.provider.contents("fact") == ["I live in Rome."]


class NoEngine:
    async def answer(self, query: MemoryQuery) -> MemoryReply:
        raise AssertionError("a bad request never reaches the engine")


@pytest.mark.parametrize("value", [
    DEEP,
    b'{"tenant_id": "t1", "user_id": "u\\ud800", "agent_id": "a", "message": "hi"}',
    b'{"tenant_id": "t1", "user_id": "u", "agent_id": "a", "message": NaN}',
    b"\xff",
    None,
])
async def test_an_unreadable_query_gets_an_error_reply(value: bytes | None) -> None:
    proc = QueryProcessor(NoEngine(), "dlq")
    answer = await proc.handle(SourceRecord("queries", 0, 0, b"k", value,
                                            request_headers("replies", b"corr-1")))
    assert isinstance(answer, ToSend)
    [reply] = answer.records
    doc = json.loads(reply.value or b"")
    assert doc["error"]["code"] == "bad_request"
    assert header(reply.headers, "kafka_correlationId") == b"corr-1"


@pytest.mark.parametrize("topic", [b"bad topic", b"x" * 250, b"..", b"caf\xc3\xa9", b"a/b"])
async def test_a_query_naming_an_illegal_reply_topic_is_dead_lettered(topic: bytes) -> None:
    proc = QueryProcessor(NoEngine(), "dlq")
    answer = await proc.handle(SourceRecord("queries", 0, 0, b"k", b"{}", [
        ("kafka_replyTopic", topic), ("kafka_correlationId", b"c")]))
    assert isinstance(answer, DeadLettered)
    assert reason(answer.dead_letter) == b"bad_reply_headers"
