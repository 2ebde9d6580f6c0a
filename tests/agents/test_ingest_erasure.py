"""The ingest stage and an erasure's fence: from the fence on, events the erasure
covers are skipped (also those earlier in the fence's own batch, and those
delivered again by a replay), the erased conversations' session states are
deleted (tombstones: a user's at the fence's second round, from the list the
erasure recorded, never looked up in the messages by ingest), the fence is
recorded as passed only after the batch's second stage, and a later event of the
same user is stored as new."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime

from streams.erasure.rules.coverage import ErasureIndex
from streams.ingest.processor import IngestProcessor
from streams.session.stale import StaleHistories
from streams.testing.ingest import InMemoryMessageStore, StaticWholeConversations
from streams.testing.outbox import RecordingPublisher
from streams.testing.session import InMemoryHotCopy, InMemorySessionTable, InMemoryStaleMarks
from streams.wire.envelope import SourceRecord
from streams.wire.erasure import ErasureFence
from tests.agents.test_ingest_processor import ev, recs
from tests.support.wiring import FakeParts, settings_for_tests, wiring

CUTOFF = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


@dataclass
class FakeErasureLog:
    passed: list[tuple[str, int, int]] = field(default_factory=list)

    async def pass_fence(self, seq: int, partition: int, tombstones: int,
                         now: datetime, round: int = 1) -> None:
        self.passed.append((f"e-{seq}" + ("" if round == 1 else f"/{round}"), partition,
                            tombstones))


@dataclass
class FakeRegistry:
    index: ErasureIndex = field(default_factory=ErasureIndex)
    log: FakeErasureLog = field(default_factory=FakeErasureLog)


def fence(offset: int, *, target: str = "user", subject: str = "u1",
          chat_end: int = 3, round: int = 1) -> SourceRecord:
    doc = ErasureFence(type="erasure_fence", seq=1, erasure_id="e-1", tenant_id="t1",
                       target=target, subject=subject, cutoff=CUTOFF,  # type: ignore[arg-type]
                       chat_offsets={0: chat_end}, partition=0, issued_at=CUTOFF,
                       round=round)
    return SourceRecord("idle", 0, offset, b"erasure:e-1", doc.model_dump_json().encode())


def build(whole: list[str] | None = None,
          ) -> tuple[IngestProcessor, InMemoryMessageStore, InMemorySessionTable, FakeRegistry]:
    """The processor; ``whole``: the conversations the erasure recorded as the user's
    alone, when a second-round fence asks."""
    store, cache = InMemoryMessageStore(), InMemoryHotCopy()
    table, registry = InMemorySessionTable(), FakeRegistry()
    stale = StaleHistories(cache, InMemoryStaleMarks())
    w = wiring(FakeParts(store=store, cache=cache, stale=stale), publisher=RecordingPublisher(),
               settings=settings_for_tests(), sessions=table)
    w.erasures = registry  # type: ignore[assignment]
    proc = w.ingest()
    proc.fences.whole = StaticWholeConversations(whole or [])
    return proc, store, table, registry


def stored(store: InMemoryMessageStore) -> list[str]:
    return [r["event_id"] for r in store.rows]


async def test_after_the_fence_the_users_events_are_skipped_and_their_states_gone() -> None:
    proc, store, table, registry = build(whole=["c1"])
    first = recs([ev(0, "c1", user_id="u1"), ev(1, "c1", user_id="u1"),
                  ev(0, "c2", user_id="u2")])
    await proc.process(first)
    assert set(table.data) == {"t1/c1", "t1/c2"}

    await proc.process([fence(0)])  # taken in: nothing is looked up, nothing deleted yet
    assert set(table.data) == {"t1/c1", "t1/c2"} and registry.log.passed == [("e-1", 0, 0)]
    whole = proc.fences.whole
    assert isinstance(whole, StaticWholeConversations) and whole.asked == []

    await proc.process([fence(1, round=2)])  # the erasure's list of what goes whole
    assert "t1/c1" not in table.data and "t1/c2" in table.data  # the tombstone
    assert registry.log.passed == [("e-1", 0, 0), ("e-1/2", 0, 1)] and whole.asked == [1]

    # a replay delivers the same records again: nothing of u1 is stored again
    store.rows.clear()
    result = await proc.process(first)
    assert stored(store) == ["c2-0"] and result.erased == 2
    assert "t1/c1" not in table.data

    # the user speaks again after the erasure: a new event, kept
    later = ev(5, "c1", user_id="u1", created_at="2026-11-30T10:00:00Z")
    result = await proc.process(recs([later], start=3))
    assert stored(store) == ["c2-0", "c1-5"] and result.erased == 0


async def test_events_before_the_fence_in_its_own_batch_are_skipped_too() -> None:
    proc, store, table, registry = build(whole=["c9"])
    late_clock = ev(2, "c9", user_id="u1", created_at="2026-11-30T11:00:00Z")  # clock ahead
    batch = [*recs([ev(0, "c9", user_id="u1"), late_clock]), fence(0, chat_end=2)]
    result = await proc.process(batch)
    assert stored(store) == [] and result.erased == 2
    assert "t1/c9" not in table.data and registry.log.passed == [("e-1", 0, 0)]


async def test_a_tenant_fence_deletes_every_state_of_the_tenant_in_its_partition() -> None:
    proc, store, table, registry = build()
    await proc.process(recs([ev(0, "c1"), ev(0, "c2"), ev(0, "c3", tenant="t2")]))
    await proc.process([fence(0, target="tenant", subject="t1")])
    assert set(table.data) == {"t2/c3"} and registry.log.passed == [("e-1", 0, 2)]
    again = await proc.process(recs([ev(1, "c1", created_at="2026-11-30T08:30:00Z")],
                                    start=3))
    assert again.erased == 1




async def test_a_re_driven_event_first_read_before_the_erasure_is_skipped() -> None:
    proc, store, _, _ = build(whole=["c1"])
    await proc.process([fence(0)])  # chat partition 0 ended at offset 3 when recorded
    dated_ahead = ev(7, "c1", user_id="u1", created_at="2026-11-30T11:00:00Z")
    redriven = SourceRecord("chat", 0, 50, b"c1", json.dumps(dated_ahead).encode(), [
        ("memstream.first.topic", b"chat"), ("memstream.first.partition", b"0"),
        ("memstream.first.offset", b"1"), ("memstream.replayed_from", b"dlq/0/4")])
    result = await proc.process([redriven])
    assert result.erased == 1 and stored(store) == []
    new = SourceRecord("chat", 0, 51, b"c1", json.dumps(dated_ahead).encode(), [])
    assert (await proc.process([new])).erased == 0  # the same, sent after: new


def session_end(conv: str, user: str, created_at: str) -> dict[str, object]:
    return {"event_id": f"{conv}-end", "type": "session_end", "tenant_id": "t1",
            "user_id": user, "agent_id": "a-of-the-end", "conversation_id": conv,
            "created_at": created_at}


async def test_an_erased_users_session_end_closes_a_group_chat_for_the_users_left() -> None:
    """Already on the topic when the erasure overtook ingest (read below its offsets,
    dated after its cutoff): the end still closes the session, under the state's ids."""
    proc, _, table, _ = build()
    await proc.process(recs([ev(0, "g4", user_id="u1"), ev(1, "g4", user_id="u1"),
                             ev(2, "g4", user_id="u2"), ev(3, "g4", user_id="u2")]))
    await proc.process([fence(0, chat_end=10)])
    end = recs([session_end("g4", "u1", "2026-11-30T11:00:00Z")], start=5)
    result = await proc.process(end)
    assert result.erased == 0
    [closed] = result.closed
    assert (closed.user_id, closed.agent_id, closed.message_count) == ("u2", "a", 4)
    assert table.data["t1/g4"]["open"] is False
    sent = [json.loads(r.value) for r in proc.deliver.publisher.sent  # type: ignore[attr-defined]
            if r.topic == "closed"]
    assert sent and all("u1" not in json.dumps(doc) and "a-of-the-end" not in json.dumps(doc)
                        for doc in sent), sent


async def test_a_group_chat_names_its_erased_last_speaker_nowhere() -> None:
    """Bob speaks, then Alice, last; Alice is erased. At the erasure's second round the
    state names Bob again (his agent, his last event), and Alice's session end closes
    the session under his ids: neither the sessions table nor the closing event holds
    her id any more."""
    def alice_nowhere(doc: object) -> bool:
        return "u1" not in json.dumps(doc) and "a-alice" not in json.dumps(doc)

    for second_round in (True, False):
        proc, _, table, _ = build()
        proc.fences.whole = StaticWholeConversations([], shared=["g9"])
        await proc.process(recs([ev(0, "g9", user_id="u2", agent_id="a-bob"),
                                 ev(1, "g9", user_id="u1", agent_id="a-alice")]))
        await proc.process([fence(0, chat_end=10)])
        if second_round:
            await proc.process([fence(1, chat_end=10, round=2)])
            assert alice_nowhere(table.data["t1/g9"]), table.data["t1/g9"]
        result = await proc.process(recs([session_end("g9", "u1", "2026-11-30T11:00:00Z")],
                                         start=5))
        [closed] = result.closed
        assert (closed.user_id, closed.agent_id, closed.last_event_id) == (
            "u2", "a-bob", "g9-0")
        assert alice_nowhere(table.data["t1/g9"]), table.data["t1/g9"]
        sent = [json.loads(r.value) for r in proc.deliver.publisher.sent  # type: ignore[attr-defined]
                if r.topic == "closed"]
        assert sent and all(alice_nowhere(doc) for doc in sent), sent


async def test_an_erased_users_session_end_read_away_from_home_is_sent_home() -> None:
    """Read on a partition other than its conversation's home (a producer with another
    partitioner), it is re-keyed there like any session end, where the state is."""
    proc, _, _, _ = build()
    await proc.process(recs([ev(0, "g6", user_id="u1"), ev(1, "g6", user_id="u2")]))
    await proc.process([fence(0, chat_end=10)])
    proc.classifier.home = lambda conversation: 1  # read on 0, its home is 1
    result = await proc.process(recs([session_end("g6", "u1", "2026-11-30T11:00:00Z")],
                                     start=5))
    assert result.closed == []
    sent = [r for r in proc.deliver.publisher.sent  # type: ignore[attr-defined]
            if r.topic != "closed"]
    assert [(r.key, r.partition) for r in sent] == [(b"g6", 1)], sent


async def test_an_erased_users_session_end_makes_no_state_and_a_conversations_erasure_drops_it(
        ) -> None:
    proc, _, table, _ = build()
    await proc.process([fence(0, chat_end=10)])  # the user's conversation went whole
    result = await proc.process(recs([session_end("c7", "u1", "2026-11-30T08:30:00Z")],
                                     start=5))
    assert result.closed == [] and "t1/c7" not in table.data
    proc, _, table, _ = build()
    await proc.process(recs([ev(0, "g5", user_id="u1"), ev(1, "g5", user_id="u2")]))
    await proc.process([fence(0, target="conversation", subject="g5", chat_end=10)])
    result = await proc.process(recs([session_end("g5", "u1", "2026-11-30T08:30:00Z")],
                                     start=5))
    assert result.erased == 1 and result.closed == []


async def test_an_event_an_erasure_deleted_past_its_cutoff_is_not_stored_when_sent_again(
        ) -> None:
    proc, store, table, _ = build()
    await proc.process([fence(0, chat_end=3)])
    store.erased_keys.add(("t1", "c1-7"))  # deleted by the erasure, dated after its cutoff
    dated_ahead = ev(7, "c1", user_id="u1", created_at="2026-11-30T09:15:00Z")
    result = await proc.process(recs([dated_ahead], start=40))
    assert result.erased == 1 and stored(store) == [] and "t1/c1" not in table.data
    other = ev(8, "c1", user_id="u1", created_at="2026-11-30T09:16:00Z")  # a new one: kept
    result = await proc.process(recs([other], start=41))
    assert result.erased == 0 and stored(store) == ["c1-8"]
