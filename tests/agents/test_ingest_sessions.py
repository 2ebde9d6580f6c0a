"""Session ends that survive a crash, stamped messages, and states that leave the table."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

from streams.ingest.processor import IngestProcessor
from streams.metrics import SESSIONS_CUT
from streams.session.stale import StaleHistories
from streams.testing.ingest import InMemoryMessageStore
from streams.testing.outbox import RecordingPublisher
from streams.testing.session import InMemoryHotCopy, InMemorySessionTable, InMemoryStaleMarks
from streams.wire.envelope import Outgoing
from streams.wire.headers import header
from tests.agents.test_ingest_idle import Clock, idle_rec
from tests.agents.test_ingest_processor import ev, recs
from tests.support.wiring import ingest_processor, settings_for_tests

SETTINGS = settings_for_tests(consolidation={"idle_timeout_s": 60.0,
                                             "closed_session_retention_s": 3600.0})


def end(n: int, conv: str = "c1") -> dict[str, Any]:
    return {"event_id": f"{conv}-end-{n}", "type": "session_end", "tenant_id": "t1",
            "user_id": "u", "agent_id": "a", "conversation_id": conv,
            "created_at": "2026-11-30T09:00:00Z"}


def processor(store: InMemoryMessageStore, table: InMemorySessionTable, pub: RecordingPublisher,
              clock: Any = None) -> IngestProcessor:
    cache = InMemoryHotCopy()
    stale = StaleHistories(cache, InMemoryStaleMarks())
    if clock is None:
        return ingest_processor(store, cache, pub, table, stale=stale, settings=SETTINGS)
    return ingest_processor(store, cache, pub, table, stale=stale, settings=SETTINGS, clock=clock)


class BrokenPublisher(RecordingPublisher):
    """Session-closed events never get through (the pod is killed meanwhile)."""

    async def publish(self, records: Sequence[Outgoing]) -> None:
        if any(r.topic == "closed" for r in records):
            raise ConnectionError("broker unreachable")
        await super().publish(records)


def closed_ids(pub: RecordingPublisher) -> list[str]:
    return [json.loads(r.value or b"{}")["closed_id"] for r in pub.on("closed")]


async def test_a_session_end_survives_a_crash_between_state_and_publish() -> None:
    store, table = InMemoryMessageStore(), InMemorySessionTable()
    batch = recs([ev(0), ev(1), end(0)])
    dying = processor(store, table, BrokenPublisher())
    _, tail = await dying.store_batch(batch)
    task = asyncio.ensure_future(tail)
    for _ in range(200):  # until the state (saying "closed") is in the table
        await asyncio.sleep(0)
        if table.data.get("t1/c1", {}).get("open") is False:
            break
    assert table.data["t1/c1"]["open"] is False
    task.cancel()  # SIGKILL: nothing was published, nothing acknowledged
    await asyncio.gather(task, return_exceptions=True)

    # the next worker: the table as its changelog left it, the batch delivered again
    pub = RecordingPublisher()
    after = processor(store, table, pub)
    await after.process(batch)
    assert closed_ids(pub) == ["t1/c1#1"]
    await after.states.barrier()  # the emptied outbox goes out with the next flush
    assert table.data["t1/c1"]["outbox"] == []
    await after.process(batch)  # and only once the event was published, never again
    assert closed_ids(pub) == ["t1/c1#1"]


async def test_an_unpublished_end_goes_out_with_an_idle_check() -> None:
    store, table, clock = InMemoryMessageStore(), InMemorySessionTable(), Clock()
    dying = processor(store, table, BrokenPublisher(), clock)
    _, tail = await dying.store_batch(recs([ev(0), end(0)]))
    task = asyncio.ensure_future(tail)
    for _ in range(200):
        await asyncio.sleep(0)
        if table.data.get("t1/c1", {}).get("outbox"):
            break
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    pub = RecordingPublisher()
    after = processor(store, table, pub, clock)
    clock.t += 120
    await after.process([idle_rec(0)])
    assert closed_ids(pub) == ["t1/c1#1"]


async def test_messages_are_stored_with_their_session() -> None:
    store, pub = InMemoryMessageStore(), RecordingPublisher()
    proc = processor(store, InMemorySessionTable(), pub)
    await proc.process(recs([ev(0), ev(1), end(0), ev(2), end(1), ev(3)]))
    assert [(r["event_id"], r["session_seq"]) for r in store.rows] == [
        ("c1-0", 1), ("c1-1", 1), ("c1-2", 2), ("c1-3", 3)]
    assert closed_ids(pub) == ["t1/c1#1", "t1/c1#2"]


@pytest.fixture
def clocked() -> tuple[InMemoryMessageStore, InMemorySessionTable, RecordingPublisher, Clock,
                       IngestProcessor]:
    store, table = InMemoryMessageStore(), InMemorySessionTable()
    pub, clock = RecordingPublisher(), Clock()
    proc = processor(store, table, pub, clock)
    return store, table, pub, clock, proc


async def test_a_quiet_closed_conversation_leaves_the_table_and_numbering_goes_on(
    clocked: Any,
) -> None:
    store, table, pub, clock, proc = clocked
    await proc.process(recs([ev(0), end(0)]))
    clock.t += 3601
    await proc.process([idle_rec(0)])
    await proc.states.barrier()
    assert "t1/c1" not in table.data
    assert store.closed_sessions == {("t1", "c1"): 1}
    # it speaks again: a new state, numbered after the last closed session
    await proc.process(recs([ev(5), end(1)], start=10))
    assert closed_ids(pub) == ["t1/c1#1", "t1/c1#2"]
    assert store.rows[-1]["session_seq"] == 2


async def test_an_open_or_recent_conversation_stays(clocked: Any) -> None:
    store, table, _, clock, proc = clocked
    await proc.process(recs([ev(0)]))
    clock.t += 3601  # open: the idle check closes it, it does not drop it
    await proc.process([idle_rec(0)])
    await proc.states.barrier()
    assert table.data["t1/c1"]["open"] is False
    assert store.closed_sessions == {}


async def test_the_mark_is_written_before_the_state_is_dropped(clocked: Any) -> None:
    store, table, _, clock, proc = clocked
    await proc.process(recs([ev(0), end(0)]))
    clock.t += 3601
    store.fail_next = 2  # the database fails: the state stays until the mark is stored
    await proc.process([idle_rec(0)])
    await proc.states.barrier()
    assert store.closed_sessions == {("t1", "c1"): 1} and "t1/c1" not in table.data


async def test_a_redelivery_of_stored_messages_sends_no_late_end() -> None:
    store, pub = InMemoryMessageStore(), RecordingPublisher()
    proc = processor(store, InMemorySessionTable(), pub)
    batch = recs([ev(0), ev(1), end(0), ev(2)])
    await proc.process(batch)
    await proc.process(batch)  # the state is ahead of the commit: all of it seen
    assert closed_ids(pub) == ["t1/c1#1"]


async def test_a_message_passed_over_gets_a_late_end_for_its_own_session() -> None:
    store, pub = InMemoryMessageStore(), RecordingPublisher()
    proc = processor(store, InMemorySessionTable(), pub)
    batch = recs([ev(0), ev(1), end(0), ev(2)])
    await proc.process([r for r in batch if r.offset != 1])
    await proc.process(batch[1:])
    ids = closed_ids(pub)
    assert ids[0] == "t1/c1#1" and ids[1].startswith("t1/c1#1~") and len(ids) == 2
    assert [(r["event_id"], r["session_seq"]) for r in store.rows] == [
        ("c1-0", 1), ("c1-2", 2), ("c1-1", 1)]
    await proc.process(batch[1:])  # once more: stored now, nothing late
    assert len(closed_ids(pub)) == 2


async def test_a_batch_planned_while_the_previous_one_publishes_its_end_sends_it_once() -> None:
    """The ingest sink runs a batch's stage one while the previous batch's stage
    two publishes its closing events: the state it reads still holds them in its
    outbox, and publishing them again would hand the session on twice."""
    store, table, pub = InMemoryMessageStore(), InMemorySessionTable(), RecordingPublisher()
    proc = processor(store, table, pub)
    _, tail_a = await proc.store_batch(recs([ev(0), end(0)]))
    task_a = asyncio.ensure_future(tail_a)  # stage two of A, as the sink starts it
    _, tail_b = await proc.store_batch(recs([ev(1)], start=2))  # stage one of B meanwhile
    await task_a
    await tail_b
    assert closed_ids(pub) == ["t1/c1#1"]
    await proc.states.barrier()
    assert table.data["t1/c1"]["outbox"] == []
    await proc.process(recs([ev(2)], start=3))
    assert closed_ids(pub) == ["t1/c1#1"]


async def test_a_batch_of_other_conversations_does_not_wait_for_a_publish() -> None:
    store, table = InMemoryMessageStore(), InMemorySessionTable()
    gate = asyncio.Event()

    class SlowPublisher(RecordingPublisher):
        async def publish(self, records: Sequence[Outgoing]) -> None:
            if any(r.topic == "closed" for r in records):
                await gate.wait()
            await super().publish(records)

    pub = SlowPublisher()
    proc = processor(store, table, pub)
    _, tail_a = await proc.store_batch(recs([ev(0), end(0)]))
    task_a = asyncio.ensure_future(tail_a)
    _, tail_b = await asyncio.wait_for(proc.store_batch(recs([ev(0, conv="c2")], start=2)), 5)
    gate.set()
    await task_a
    await tail_b
    assert closed_ids(pub) == ["t1/c1#1"]


async def test_an_event_dated_far_ahead_of_the_clock_is_dead_lettered() -> None:
    """Sessions are cut in event time: one message dated years ahead would keep
    its conversation in one session; it goes to the dead letters instead."""
    store, table = InMemoryMessageStore(), InMemorySessionTable()
    pub, clock = RecordingPublisher(), Clock()
    proc = processor(store, table, pub, clock)
    far = ev(1, created_at="2036-11-30T08:00:00Z")
    res = await proc.process(recs([ev(0), far, ev(2)]))
    assert res.dead_lettered == 1 and [r["event_id"] for r in store.rows] == ["c1-0", "c1-2"]
    (dead,) = pub.on("dlq")
    assert header(dead.headers, "memstream.error.reason") == b"out_of_range"
    assert b"ahead of the worker's clock" in (header(dead.headers, "memstream.error.message")
                                               or b"")


async def test_a_redelivered_copy_after_the_end_does_not_make_its_batch_mates_late() -> None:
    """A re-keyed conversation's events forwarded twice (the forwarding worker
    lost its partition before its commit): a copy of a message stored by an
    earlier batch comes after the session's end, in the batch that stores the
    session's last message. The copy is a redelivery; the last message is in
    its session, which the end hands on whole: no late closing event."""
    store, pub = InMemoryMessageStore(), RecordingPublisher()
    proc = processor(store, InMemorySessionTable(), pub)
    await proc.process(recs([ev(0), ev(1)]))
    the_end = {**end(0), "created_at": "2026-11-30T08:00:03Z"}
    await proc.process(recs([ev(2), the_end, ev(1), ev(2)], start=2))
    assert closed_ids(pub) == ["t1/c1#1"]
    assert [(r["event_id"], r["session_seq"]) for r in store.rows] == [
        ("c1-0", 1), ("c1-1", 1), ("c1-2", 1)]


async def test_a_copy_after_the_end_of_a_message_stored_in_the_same_batch_is_not_late() -> None:
    """The batch stores a message, then the end closes its session, then a copy
    of that message comes: the copy is counted by its first copy, in the session."""
    store, pub = InMemoryMessageStore(), RecordingPublisher()
    proc = processor(store, InMemorySessionTable(), pub)
    await proc.process(recs([ev(0)]))
    the_end = {**end(0), "created_at": "2026-11-30T08:00:03Z"}
    await proc.process(recs([ev(1), the_end, ev(1)], start=1))
    assert closed_ids(pub) == ["t1/c1#1"]
    assert [(r["event_id"], r["session_seq"]) for r in store.rows] == [("c1-0", 1), ("c1-1", 1)]


async def test_a_message_after_the_end_and_never_stored_is_late_once_among_copies() -> None:
    store, pub = InMemoryMessageStore(), RecordingPublisher()
    proc = processor(store, InMemorySessionTable(), pub)
    the_end = {**end(0), "created_at": "2026-11-30T08:00:03Z"}
    await proc.process(recs([ev(0), the_end]))
    await proc.process(recs([ev(1), ev(1)], start=2))
    ids = closed_ids(pub)
    assert ids[0] == "t1/c1#1" and ids[1].startswith("t1/c1#1~") and len(ids) == 2
    assert [(r["event_id"], r["session_seq"]) for r in store.rows] == [("c1-0", 1), ("c1-1", 1)]


async def test_an_older_message_after_the_end_in_the_same_batch_goes_with_that_end() -> None:
    """The end and, after it, an older message of its session in one batch: the
    message is stored before the batch's closing event goes out, which takes it;
    a late closing event would hand the session on twice."""
    store, pub = InMemoryMessageStore(), RecordingPublisher()
    proc = processor(store, InMemorySessionTable(), pub)
    the_end = {**end(0), "created_at": "2026-11-30T08:00:03Z"}
    await proc.process(recs([ev(0), the_end, ev(1)]))
    assert [(r["event_id"], r["session_seq"]) for r in store.rows] == [("c1-0", 1), ("c1-1", 1)]
    assert closed_ids(pub) == ["t1/c1#1"]
    await proc.process(recs([ev(2, created_at="2026-11-30T08:00:02Z")], start=3))
    ids = closed_ids(pub)  # in a later batch it is late: its own closing event
    assert len(ids) == 2 and ids[1].startswith("t1/c1#1~")


async def test_a_session_reaching_its_size_is_closed_at_ingest_and_counted() -> None:
    settings = settings_for_tests(consolidation={"idle_timeout_s": 60.0,
                                                 "session_max_messages": 3,
                                                 "session_max_bytes": 1_000_000})
    store, table, pub = InMemoryMessageStore(), InMemorySessionTable(), RecordingPublisher()
    cache = InMemoryHotCopy()
    proc = ingest_processor(store, cache, pub, table, settings=settings,
                            stale=StaleHistories(cache, InMemoryStaleMarks()))
    before = SESSIONS_CUT.labels("t1", "messages")._value.get()
    await proc.process(recs([ev(i) for i in range(7)]))
    await proc.process(recs([end(0)], start=7))
    assert closed_ids(pub) == ["t1/c1#1", "t1/c1#2", "t1/c1#3"]
    counts = [json.loads(r.value or b"{}")["message_count"] for r in pub.on("closed")]
    assert counts == [3, 3, 1]
    assert [r["session_seq"] for r in store.rows] == [1, 1, 1, 2, 2, 2, 3]
    assert SESSIONS_CUT.labels("t1", "messages")._value.get() - before == 2
