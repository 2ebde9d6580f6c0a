"""IngestProcessor against in-memory stores: ordering, idempotency and failure rules."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streams.ingest.processor import IngestProcessor
from streams.session.stale import StaleHistories
from streams.testing.ingest import InMemoryMessageStore
from streams.testing.outbox import RecordingPublisher
from streams.testing.session import InMemoryHotCopy, InMemorySessionTable, InMemoryStaleMarks
from streams.wire.envelope import SourceRecord
from streams.wire.headers import header
from tests.support.wiring import ingest_processor, settings_for_tests

SETTINGS = settings_for_tests()


def ev(i: int, conv: str = "c1", tenant: str = "t1", **kw: Any) -> dict[str, Any]:
    doc = {"event_id": f"{conv}-{i}", "type": "message", "tenant_id": tenant, "user_id": "u",
           "agent_id": "a", "conversation_id": conv, "role": "user" if i % 2 == 0 else "assistant",
           "content": f"message {i}", "created_at": f"2026-11-30T08:00:{i % 60:02d}Z"}
    doc.update(kw)
    return doc


def recs(
    docs: list[dict[str, Any] | bytes], topic: str = "chat", start: int = 0
) -> list[SourceRecord]:
    out = []
    for n, d in enumerate(docs):
        value = d if isinstance(d, bytes) else json.dumps(d).encode()
        key = None if isinstance(d, bytes) else str(d.get("conversation_id", "")).encode()
        out.append(SourceRecord(topic, 0, start + n, key, value))
    return out


@pytest.fixture
def parts() -> tuple[InMemoryMessageStore, InMemoryHotCopy, RecordingPublisher,
                     InMemorySessionTable, IngestProcessor]:
    store, cache = InMemoryMessageStore(), InMemoryHotCopy()
    pub, table = RecordingPublisher(), InMemorySessionTable()
    stale = StaleHistories(cache, InMemoryStaleMarks())
    return store, cache, pub, table, ingest_processor(store, cache, pub, table, stale=stale,
                                                      settings=SETTINGS)


async def test_stores_in_order_and_fills_cache(parts: Any) -> None:
    store, cache, pub, table, proc = parts
    res = await proc.process(recs([ev(i) for i in range(5)]))
    assert res.stored == 5
    assert [r["event_id"] for r in store.rows] == [f"c1-{i}" for i in range(5)]
    assert [d["event_id"] for d in cache.lists[("t1", "c1")]] == [
        f"c1-{i}" for i in range(4, -1, -1)
    ]
    assert json.loads(json.dumps(table.data["t1/c1"]))["message_count"] == 5
    assert table.writes == 1  # one changelog write per conversation and batch


async def test_replay_stores_nothing_twice_and_keeps_counts(parts: Any) -> None:
    store, cache, pub, table, proc = parts
    batch = recs([ev(i) for i in range(5)])
    await proc.process(batch)
    res = await proc.process(batch)
    assert (res.stored, res.duplicates) == (0, 5)
    assert len(store.rows) == 5
    assert table.data["t1/c1"]["message_count"] == 5
    assert ("t1", "c1") in cache.invalidated  # a redelivery drops the list; reads rebuild it


async def test_database_failure_is_retried_until_it_succeeds(parts: Any) -> None:
    store, cache, pub, table, proc = parts
    store.fail_next = 4
    res = await proc.process(recs([ev(i) for i in range(3)]))
    assert store.calls == 5 and res.stored == 3 and len(store.rows) == 3


async def test_cache_failure_never_blocks_the_database(parts: Any) -> None:
    store, cache, pub, table, proc = parts
    cache.failing = True
    res = await proc.process(recs([ev(i) for i in range(3)]))
    assert res.stored == 3 and not res.cache_ok
    assert len(store.rows) == 3 and table.data["t1/c1"]["message_count"] == 3


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"\x00\xff", "undecodable"),
        (json.dumps({"type": "message"}).encode(), "missing_tenant"),
        (json.dumps(ev(0, type="edit")).encode(), "unknown_type"),
        (json.dumps(ev(0, content="x" * 70_000)).encode(), "too_large"),
        (json.dumps(ev(0, role="bot")).encode(), "schema"),
    ],
)
async def test_bad_input_is_dead_lettered_with_reason_and_the_rest_goes_on(
    parts: Any, value: bytes, reason: str
) -> None:
    store, cache, pub, table, proc = parts
    batch = recs([ev(0), value, ev(1)])
    res = await proc.process(batch)
    assert res.stored == 2 and res.dead_lettered == 1
    (dead,) = pub.on("dlq")
    assert dead.value == value
    assert header(dead.headers, "memstream.error.reason") == reason.encode()
    assert header(dead.headers, "memstream.source.offset") == b"1"
    assert header(dead.headers, "memstream.source.topic") == b"chat"
    assert header(dead.headers, "memstream.error.class")


async def test_dead_letters_are_retried_not_lost(parts: Any) -> None:
    store, cache, pub, table, proc = parts
    pub.fail_next = 2
    await proc.process(recs([b"garbage"]))
    assert len(pub.on("dlq")) == 1


async def test_subagent_chat_is_rerouted_and_the_rest_dropped(parts: Any) -> None:
    store, cache, pub, table, proc = parts
    sub = dict(conversation_id="agent:c1:search", parent_conversation_id="c1")
    docs = [ev(0, **sub, role="assistant", content="found 3 flights"),
            ev(1, **sub, role="tool", content="{}"),
            ev(2, **sub, role="system", content="you search")]
    res = await proc.process(recs(docs))
    assert (res.rerouted, res.dropped, res.stored) == (1, 2, 0)
    (out,) = pub.on("sub")
    assert out.key == b"c1"
    # the re-keyed copy is stored under the parent conversation
    res2 = await proc.process([SourceRecord("sub", 0, 0, out.key, out.value)])
    assert res2.stored == 1
    row = store.rows[0]
    assert (row["conversation_id"], row["origin_conversation_id"]) == ("c1", "agent:c1:search")


async def test_session_end_closes_once(parts: Any) -> None:
    store, cache, pub, table, proc = parts
    end = {k: v for k, v in ev(9).items() if k not in {"role", "content"}} | {"type": "session_end"}
    batch = recs([ev(0), ev(1), end])
    res = await proc.process(batch)
    assert len(res.closed) == 1 and res.closed[0].message_count == 2
    (closed,) = pub.on("closed")
    assert closed.key == b"c1"
    assert json.loads(closed.value or b"{}")["closed_id"] == "t1/c1#1"
    again = await proc.process(batch)  # redelivered batch: no second close
    assert again.closed == []


async def test_tenants_are_separate_conversations(parts: Any) -> None:
    store, cache, pub, table, proc = parts
    await proc.process(recs([ev(0, tenant="ta"), ev(0, tenant="tb")]))
    assert set(table.data) == {"ta/c1", "tb/c1"}
    assert set(cache.lists) == {("ta", "c1"), ("tb", "c1")}
    assert len(store.rows) == 2


async def test_only_new_conversations_may_create_a_cache_list(parts: Any) -> None:
    store, cache, pub, table, proc = parts
    await proc.process(recs([ev(0)]))
    assert ("t1", "c1") in cache.fresh_seen
    cache.fresh_seen.clear()
    await proc.process(recs([ev(1)], start=1))
    assert ("t1", "c1") not in cache.fresh_seen
