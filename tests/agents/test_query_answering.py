"""One request to its reply: expired and redelivered requests are not answered,
answered ones are remembered, Redis failures never keep a request unanswered."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import pytest
from prometheus_client import REGISTRY

from streams.adapters.kafka.query_consumer import QueryConsumer
from streams.adapters.kafka.query_consumer_config import QueryConsumerConfig
from streams.query import answering as answering_module
from streams.query.answered import AnsweredRequests, request_key
from streams.query.answering import QueryAnswering
from streams.query.ports import SentReplies
from streams.query.processor import REPLY_WAY_S, QueryProcessor
from streams.query.rules.reply_targets import ReplyTargets
from streams.testing.query import (
    EchoLookup,
    KnownReplies,
    MemoryAnsweredRecord,
    MemoryDurableAnswers,
    RecordedReplies,
)
from streams.wire.envelope import Outgoing, SourceRecord
from streams.wire.headers import ANSWERED_PARTITION, header
from streams.wire.query import MemoryQuery, MemoryReply
from streams.wire.signing import Signing, signed_headers
from streams.wire.spring_reply import request_headers
from tests.agents.fakes import FakePublisher
from tests.support.worker import eventually

NOW = 1_800_000_000.0


def request(cid: bytes, *, age_s: float = 0.0, timeout_ms: int | None = None,
            headers: list[tuple[str, bytes]] | None = None, value: bytes | None = None,
            offset: int = 0) -> SourceRecord:
    doc: dict[str, Any] = {"request_id": cid.decode(), "tenant_id": "t", "user_id": "u",
                           "agent_id": "a", "message": "hi"}
    if timeout_ms is not None:
        doc["options"] = {"timeout_ms": timeout_ms}
    return SourceRecord("q", 0, offset, b"t/u", value or json.dumps(doc).encode(),
                        request_headers("replies", cid) if headers is None else headers,
                        timestamp=NOW - age_s)


def key_of(cid: bytes) -> str:
    """The answered record's key of :func:`request` ``(cid)``."""
    rec = request(cid)
    assert rec.value is not None
    return request_key("t", "replies", None, cid, rec.value)


def build(record: MemoryAnsweredRecord | None = None,
          durable: MemoryDurableAnswers | None = None,
          maybe_seen: Callable[[SourceRecord], bool] = lambda rec: True,
          sent_replies: SentReplies | None = None,
          ) -> tuple[QueryAnswering, EchoLookup, RecordedReplies, FakePublisher,
                     MemoryAnsweredRecord]:
    engine, replies, dlq = EchoLookup(), RecordedReplies(), FakePublisher()
    record = record or MemoryAnsweredRecord()
    processor = QueryProcessor(engine, "dlq", clock=lambda: NOW)
    answered = AnsweredRequests(record, retry_after_s=10.0, clock=lambda: NOW,
                                durable=durable, wall_clock=lambda: NOW)
    return (QueryAnswering(processor, replies, dlq, answered, retry_initial_s=0.01,
                           retry_max_s=0.01, maybe_seen=maybe_seen, sent_replies=sent_replies),
            engine, replies, dlq, record)


async def whole(answering: QueryAnswering, rec: SourceRecord) -> None:
    """``rec`` answered as the query consumer answers it: the reply, then its record's
    durable write, which settles after the slot is let go."""
    settling = await answering(rec)
    if settling is not None:
        await settling


def counter(name: str) -> float:
    """The counter's value, summed over its labels."""
    return sum(s.value for m in REGISTRY.collect() for s in m.samples if s.name == name)


async def test_an_answered_request_is_remembered_and_its_redelivery_not_answered() -> None:
    answering, engine, replies, _, record = build()
    duplicates = counter("memstream_query_duplicates_total")
    await whole(answering, request(b"c-1"))
    assert len(replies.sent) == 1 and header(replies.sent[0].headers,
                                             "kafka_correlationId") == b"c-1"
    assert record.answered == {key_of(b"c-1")} and record.began == {}
    await whole(answering, request(b"c-1", offset=1))  # the same request, redelivered
    assert len(replies.sent) == 1 and len(engine.asked) == 1
    assert counter("memstream_query_duplicates_total") == duplicates + 1
    await whole(answering, request(b"c-2", offset=2))
    assert len(replies.sent) == 2


async def test_a_request_older_than_its_timeout_is_counted_and_not_answered() -> None:
    answering, engine, replies, _, record = build()
    expired = counter("memstream_query_expired_total")
    await whole(answering, request(b"late", age_s=1.5))  # default timeout_ms: 1000
    await whole(answering, request(b"long", age_s=1.5, timeout_ms=2000))
    await whole(answering, request(b"ancient", age_s=3600, timeout_ms=60_000))
    assert [r.request_id for r in engine.asked] == ["long"]
    assert len(replies.sent) == 1
    assert counter("memstream_query_expired_total") == expired + 2
    # an expired request costs no Redis round trip: "long" is checked and remembered
    assert record.calls == 2


async def test_with_redis_down_every_request_is_answered_and_redis_is_skipped_a_while() -> None:
    record = MemoryAnsweredRecord()
    record.down = True
    answering, _, replies, _, _ = build(record)
    await whole(answering, request(b"a"))
    await whole(answering, request(b"a", offset=1))  # cannot tell it was answered: answered again
    assert len(replies.sent) == 2
    assert record.calls == 1  # skipped after the failure


async def test_a_lost_reply_is_not_remembered() -> None:
    answering, _, replies, _, record = build()
    replies.fail = True
    await whole(answering, request(b"lost"))
    assert record.began == {key_of(b"lost"): int(NOW * 1000)}  # begun only
    assert record.answered == set()
    replies.fail = False
    await whole(answering, request(b"lost", offset=1))
    assert len(replies.sent) == 1


async def test_a_request_with_no_reply_topic_is_dead_lettered_even_when_the_broker_fails() -> None:
    answering, _, replies, dlq, record = build()
    dlq.fail_next = 2
    await whole(answering, request(b"x", headers=[]))
    assert replies.sent == [] and len(dlq.on("dlq")) == 1
    assert header(dlq.sent[0].headers, "memstream.error.reason") == b"no_reply_topic"
    assert record.calls == 0


async def test_a_request_without_correlation_id_is_answered_and_not_remembered() -> None:
    answering, _, replies, _, record = build()
    await whole(answering, request(b"n", headers=[("kafka_replyTopic", b"replies")]))
    await whole(answering, request(b"n", headers=[("kafka_replyTopic", b"replies")], offset=1))
    assert len(replies.sent) == 2 and record.calls == 0


async def test_a_redis_that_restarted_empty_forgets_nothing() -> None:
    """The reply is recorded in the database too: delivered again after Redis lost
    its copy, the request is not answered twice."""
    durable = MemoryDurableAnswers()
    answering, engine, replies, _, record = build(durable=durable)
    settling = await answering(request(b"c-1"))
    assert settling is not None and durable.keys == set()  # the reply is out before it
    await settling
    assert durable.keys == {key_of(b"c-1")}
    record.answered.clear()  # Redis restarted without its data
    record.began.clear()
    await whole(answering, request(b"c-1", offset=1))
    assert len(replies.sent) == 1 and len(engine.asked) == 1


async def test_a_request_new_to_the_group_is_not_looked_up_in_the_database() -> None:
    durable = MemoryDurableAnswers()
    answering, _, replies, _, _ = build(durable=durable, maybe_seen=lambda rec: False)
    await whole(answering, request(b"c-1"))
    await whole(answering, request(b"c-2", offset=1))
    assert len(replies.sent) == 2 and durable.reads == 0


async def test_requests_completing_together_are_recorded_in_one_write() -> None:
    durable = MemoryDurableAnswers()
    answering, _, replies, _, _ = build(durable=durable)
    await asyncio.gather(*(whole(answering, request(f"c-{i}".encode(), offset=i))
                           for i in range(20)))
    assert len(replies.sent) == 20
    assert sum(len(w) for w in durable.writes) == 20 and len(durable.writes) < 20


async def test_with_the_database_down_every_request_is_still_answered() -> None:
    durable = MemoryDurableAnswers()
    durable.down = True
    answering, _, replies, _, record = build(durable=durable)
    record.down = True
    await whole(answering, request(b"c-1"))
    await whole(answering, request(b"c-1", offset=1))  # nothing knows it: answered again
    assert len(replies.sent) == 2


def begun(record: MemoryAnsweredRecord, cid: bytes, at_ms: int) -> None:
    """What a worker killed while answering leaves: the beginning, no answer."""
    record.began[key_of(cid)] = at_ms


async def test_a_reply_a_killed_worker_sent_is_found_and_not_sent_again() -> None:
    lookup = KnownReplies(True)
    answering, engine, replies, _, record = build(sent_replies=lookup)
    begun(record, b"c-1", 1_799_999_990_000)
    duplicates = counter("memstream_query_duplicates_total")
    await whole(answering, request(b"c-1"))
    assert lookup.asked == [("replies", b"c-1", 1_799_999_990_000)]
    assert replies.sent == [] and engine.asked == []
    assert counter("memstream_query_duplicates_total") == duplicates + 1
    # recorded now: delivered once more, it is not looked up again
    assert record.answered == {key_of(b"c-1")} and record.began == {}
    await whole(answering, request(b"c-1", offset=1))
    assert len(lookup.asked) == 1 and replies.sent == []


async def test_a_reply_not_found_or_not_known_is_sent() -> None:
    for found in (False, None):
        lookup = KnownReplies(found)
        answering, _, replies, _, record = build(sent_replies=lookup)
        begun(record, b"c-1", 1_799_999_990_000)
        await whole(answering, request(b"c-1"))
        assert len(lookup.asked) == 1 and len(replies.sent) == 1
        assert record.answered == {key_of(b"c-1")} and record.began == {}


async def test_only_a_request_an_earlier_attempt_began_is_looked_up() -> None:
    lookup = KnownReplies(True)
    answering, _, replies, _, _ = build(sent_replies=lookup)
    await asyncio.gather(*(answering(request(f"c-{i}".encode(), offset=i)) for i in range(5)))
    assert lookup.asked == [] and len(replies.sent) == 5


async def test_the_first_attempt_s_beginning_is_kept() -> None:
    lookup = KnownReplies(False)
    answering, _, replies, _, record = build(sent_replies=lookup)
    begun(record, b"c-1", 1_799_999_990_000)
    replies.fail = True  # this attempt's reply is lost too
    await whole(answering, request(b"c-1"))
    replies.fail = False
    await whole(answering, request(b"c-1", offset=1))
    assert [a[2] for a in lookup.asked] == [1_799_999_990_000] * 2
    assert len(replies.sent) == 1


class HeldReplies(RecordedReplies):
    """Replies held until ``gate`` opens (then delivered, or ``error``)."""

    def __init__(self, error: Exception | None = None) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.error = error

    async def deliver(self, r: Outgoing) -> bool:
        await self.gate.wait()
        if self.error is not None:
            raise self.error
        return await super().deliver(r)


def slow_replies(answering: QueryAnswering, *,
                 error: Exception | None = None) -> tuple[asyncio.Event, HeldReplies]:
    """The answering's replies held until the returned gate opens."""
    held = HeldReplies(error)
    answering.replies = held
    return held.gate, held


async def cancelled_while_sending(answering: QueryAnswering, gate: asyncio.Event,
                                  opens_after_s: float) -> asyncio.Future[None]:
    """Cancel a request while its reply is held, open the gate ``opens_after_s`` later,
    and wait for the request as a revocation's drain does."""
    task = asyncio.ensure_future(answering(request(b"c-1")))
    for _ in range(50):
        await asyncio.sleep(0)
    task.cancel()
    asyncio.get_running_loop().call_later(opens_after_s, gate.set)  # the broker takes it
    await asyncio.gather(task, return_exceptions=True)  # what the drain waits for
    return task


async def test_a_cancelled_request_whose_reply_is_on_its_way_still_records_it() -> None:
    """A revocation's drain timeout cancels a request while its reply is being
    sent: the reply goes out all the same, and the request ends once the reply
    and its record are done — as answered, so that the consumer commits it; a
    next owner would find it recorded all the same."""
    answering, _, _, _, record = build()
    gate, replies = slow_replies(answering)
    task = await cancelled_while_sending(answering, gate, 0.05)
    assert not task.cancelled() and task.result() is None
    assert len(replies.sent) == 1
    assert key_of(b"c-1") in record.answered
    lookup = KnownReplies(False)
    after, engine, _, _, _ = build(record=record, sent_replies=lookup)
    await whole(after, request(b"c-1", offset=1))
    assert engine.asked == [] and lookup.asked == []


async def test_a_cancelled_request_whose_reply_went_out_waits_for_its_durable_record(
        monkeypatch: Any) -> None:
    """Cancelled while its reply was on its way, a request ends answered only once both
    copies of its record are written (within the grace): the consumer commits it, and a
    next owner finds it in the database even if Redis forgot it. Past the grace it is let
    go uncommitted."""
    durable = MemoryDurableAnswers()
    answering, _, _, _, _ = build(durable=durable)
    gate, _ = slow_replies(answering)
    task = await cancelled_while_sending(answering, gate, 0.05)
    assert not task.cancelled() and task.result() is None
    assert durable.keys == {key_of(b"c-1")}
    monkeypatch.setattr(answering_module, "SEND_GRACE_S", 0.08)  # less than the write's linger
    durable = MemoryDurableAnswers()
    answering, _, _, _, _ = build(durable=durable)
    gate, _ = slow_replies(answering)
    task = await cancelled_while_sending(answering, gate, 0.01)
    assert task.cancelled() and durable.keys == set()


async def test_an_expired_or_refused_request_is_neither_claimed_nor_looked_up() -> None:
    lookup = KnownReplies(True)
    answering, engine, replies, dlq, record = build(sent_replies=lookup)
    answering.processor.reply_targets = ReplyTargets.of(("replies",), ("chat",), "ms")
    begun(record, b"gone", 1_799_999_990_000)
    await whole(answering, request(b"gone", age_s=1.5))  # the caller gave up (1 s)
    refused = request(b"bad", headers=request_headers("chat", b"bad"))
    record.began[("chat", b"bad")] = 1_799_999_990_000
    await whole(answering, refused)
    assert lookup.asked == [] and engine.asked == [] and replies.sent == []
    assert len(dlq.on("dlq")) == 1
    assert record.calls == 0  # no Redis round trip for either


async def test_a_reply_slower_than_the_grace_lets_the_request_go(monkeypatch: Any) -> None:
    """Past the grace the request ends cancelled (let go uncommitted: the next owner
    answers it or finds its reply); the reply still goes out when the broker takes it."""
    monkeypatch.setattr(answering_module, "SEND_GRACE_S", 0.02)
    answering, _, _, _, _ = build()
    gate, replies = slow_replies(answering)
    task = await cancelled_while_sending(answering, gate, 0.2)
    assert task.cancelled() and replies.sent == []
    await eventually_sent(replies)


async def test_a_reply_that_fails_or_is_lost_during_the_grace_lets_the_request_go() -> None:
    answering, _, _, _, _ = build()
    gate, _ = slow_replies(answering, error=OSError("broker gone"))
    task = await cancelled_while_sending(answering, gate, 0.01)
    assert task.cancelled()
    answering, _, _, _, record = build()
    gate, replies = slow_replies(answering)
    replies.fail = True  # the producer gave up on it: not delivered
    task = await cancelled_while_sending(answering, gate, 0.01)
    assert task.cancelled()
    assert not record.answered


async def eventually_sent(replies: RecordedReplies) -> None:
    for _ in range(100):
        if replies.sent:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the reply never went out")


def slow_record() -> MemoryAnsweredRecord:
    """A record whose round trips wait for its gate: the claim is out until it opens."""
    record = MemoryAnsweredRecord()
    record.gate = asyncio.Event()
    return record


class GatedEngine(EchoLookup):
    """Tells when it began; answers when ``done`` opens; stopped, it takes a while to
    unwind (as a search giving back its connection does)."""

    def __init__(self) -> None:
        super().__init__()
        self.began = asyncio.Event()
        self.done = asyncio.Event()
        self.cancelled = False
        self.unwound = False

    async def answer(self, q: MemoryQuery, budget_s: float | None = None) -> MemoryReply:
        self.began.set()
        try:
            await self.done.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            await asyncio.sleep(0.02)
            self.unwound = True
            raise
        return await super().answer(q)


def gate(record: MemoryAnsweredRecord) -> asyncio.Event:
    assert record.gate is not None
    return record.gate


def replies_ok() -> float:
    return REGISTRY.get_sample_value("memstream_query_replies_total", {"outcome": "ok"}) or 0.0


def gated(record: MemoryAnsweredRecord, *, new: bool = True,
          ) -> tuple[QueryAnswering, GatedEngine, RecordedReplies]:
    """``new``: requests produced after the partition was assigned (the consumer's
    ``maybe_seen`` false)."""
    answering, _, replies, _, _ = build(record=record, maybe_seen=lambda rec: not new)
    engine = GatedEngine()
    answering.processor.engine = engine
    return answering, engine, replies


async def test_a_valid_request_is_answered_while_its_claim_is_out() -> None:
    """The claim's round trip is off the caller's wait: the engine begins before it
    returns, and the reply goes out once both are done."""
    record = slow_record()
    answering, engine, replies = gated(record)
    replied = replies_ok()
    task = asyncio.ensure_future(answering(request(b"c-1")))
    await asyncio.wait_for(engine.began.wait(), 1.0)  # the claim is still out
    assert replies.sent == [] and record.calls == 0
    engine.done.set()
    await asyncio.sleep(0.01)
    assert replies.sent == []  # answered, the claim not back: nothing is sent yet
    gate(record).set()
    await asyncio.wait_for(task, 1.0)
    assert len(replies.sent) == 1
    assert replies_ok() == replied + 1


async def test_a_duplicate_s_answer_made_meanwhile_is_neither_sent_nor_counted() -> None:
    record = slow_record()
    record.answered.add(key_of(b"c-1"))  # answered before
    duplicates = counter("memstream_query_duplicates_total")
    ok = replies_ok()
    for finished in (True, False):  # the engine done before the claim is back, or not
        answering, engine, replies = gated(record)
        gate(record).clear()
        task = asyncio.ensure_future(answering(request(b"c-1")))
        await asyncio.wait_for(engine.began.wait(), 1.0)
        if finished:
            engine.done.set()
            await asyncio.sleep(0.01)
        gate(record).set()
        await asyncio.wait_for(task, 1.0)
        assert replies.sent == []
        assert engine.cancelled is not finished  # still running: stopped
    assert counter("memstream_query_duplicates_total") == duplicates + 2
    assert replies_ok() == ok


async def ended(task: asyncio.Future[Any]) -> None:
    """Back as soon as ``task`` is done (its own end, not some later turn of the loop)."""
    done = asyncio.Event()
    task.add_done_callback(lambda _: done.set())
    await done.wait()


async def test_a_stopped_answer_has_unwound_when_its_request_is_done() -> None:
    """A duplicate's answer, or a cancelled request's, is stopped and waited for: none of
    its work runs on past the request (past a consumer's drain, at a revocation)."""
    record = slow_record()
    record.answered.add(key_of(b"c-1"))  # answered before
    answering, engine, replies = gated(record)
    gate(record).clear()
    task = asyncio.ensure_future(answering(request(b"c-1")))
    await asyncio.wait_for(engine.began.wait(), 1.0)
    gate(record).set()
    await ended(task)
    assert engine.cancelled and engine.unwound
    answering, engine, replies = gated(slow_record())
    task = asyncio.ensure_future(answering(request(b"c-2")))
    await asyncio.wait_for(engine.began.wait(), 1.0)
    task.cancel()
    await ended(task)
    assert task.cancelled()
    assert engine.cancelled and engine.unwound
    assert replies.sent == []


async def test_a_request_that_may_have_been_delivered_before_is_answered_after_its_claim(
) -> None:
    """A partition's backlog at its assignment (a worker died or left): duplicates are
    likely there, so the engine waits for the claim instead of working for nothing."""
    record = slow_record()
    answering, engine, replies = gated(record, new=False)
    task = asyncio.ensure_future(answering(request(b"c-1")))
    await asyncio.sleep(0.05)
    assert not engine.began.is_set()  # the claim is still out
    gate(record).set()
    await asyncio.wait_for(engine.began.wait(), 1.0)
    engine.done.set()
    await asyncio.wait_for(task, 1.0)
    assert len(replies.sent) == 1


async def test_two_tenants_using_one_correlation_id_are_both_answered() -> None:
    """The record is keyed by the tenant and the request: a tenant that learns or
    guesses another's correlation id can neither suppress its reply nor get its own
    delivered in its place."""
    answering, _, replies, _, record = build()
    mine, theirs = (json.dumps({"request_id": r, "tenant_id": t, "user_id": "u",
                                "agent_id": "a", "message": "hi"}).encode()
                    for r, t in (("r1", "t"), ("r2", "other")))
    await whole(answering, request(b"same", value=theirs))
    await whole(answering, request(b"same", value=mine, offset=1))
    assert [json.loads(r.value or b"")["request_id"] for r in replies.sent] == ["r2", "r1"]
    assert len(record.answered) == 2


async def test_a_refused_request_is_not_recorded_and_cannot_stand_for_another() -> None:
    answering, _, replies, _, record = build()
    await whole(answering, request(b"c-1", value=b"{not json"))
    await whole(answering, request(b"c-1", offset=1))
    assert [json.loads(r.value or b"")["error"] is None for r in replies.sent] == [False, True]
    assert record.answered == {key_of(b"c-1")}


async def test_the_reply_names_the_partition_its_request_was_read_from() -> None:
    answering, _, replies, _, _ = build()
    rec = request(b"c-1")
    await answering(SourceRecord("q", 3, 0, rec.key, rec.value, rec.headers,
                                 timestamp=rec.timestamp))
    assert header(replies.sent[0].headers, ANSWERED_PARTITION) == b"3"


async def test_a_request_taken_late_gets_what_is_left_of_its_caller_s_wait() -> None:
    answering, engine, _, _, _ = build()
    await whole(answering, request(b"c-1", age_s=0.7, timeout_ms=1000))
    assert engine.budgets == [pytest.approx(1.0 - 0.7 - REPLY_WAY_S)]


async def test_a_signed_request_sent_again_later_is_as_old_as_its_signature() -> None:
    """A captured signed request re-sent within the signature's window, with a fresh
    record timestamp, has expired by its signed time: it is not answered again."""
    engine, replies, dlq = EchoLookup(), RecordedReplies(), FakePublisher()
    key = "k" * 16
    processor = QueryProcessor(engine, "dlq", clock=lambda: NOW,
                               signing=Signing({"t": key}, max_age_s=300))
    answering = QueryAnswering(processor, replies, dlq, AnsweredRequests(None),
                               retry_initial_s=0.01, retry_max_s=0.01)
    for signed_at, answered in ((NOW, True), (NOW - 250, False)):
        rec = request(b"c-1")
        assert rec.value is not None
        headers = [*rec.headers, *signed_headers(key, int(signed_at), "replies", None, b"c-1",
                                                 rec.value)]
        before = len(replies.sent)
        await answering(SourceRecord("q", 0, 0, rec.key, rec.value, headers,
                                     timestamp=NOW))  # the record itself is fresh
        assert (len(replies.sent) > before) is answered


class SlowEcho(EchoLookup):
    """Answers after ``took_s`` (a real wait), the processor's clock moved on as much;
    fails then when ``fails``."""

    def __init__(self, clock: list[float], took_s: float, fails: bool = False) -> None:
        super().__init__()
        self.clock, self.took_s, self.fails = clock, took_s, fails

    async def answer(self, q: MemoryQuery, budget_s: float | None = None) -> MemoryReply:
        reply = await super().answer(q, budget_s)
        await asyncio.sleep(self.took_s)
        self.clock[0] += self.took_s
        if self.fails:
            raise RuntimeError("the engine failed")
        return reply


LATE = re.compile(r"query 'r-1' of tenant 't' answered (\d+) ms after it was sent "
                  r"\(deadline 300 ms\): taken up after (\d+) ms, handled in (\d+) ms")


@pytest.mark.parametrize(("age_s", "took_s", "fails"), [
    (0.05, 0.1, False),  # 150 ms of 300: not told
    (0.15, 0.2, False),  # 350 ms: taken up after 150, handled in 200
    (0.0, 0.35, True),   # an engine failing after 350 ms: handled in 350
])
async def test_a_reply_after_its_deadline_is_logged_with_where_the_time_went(
        caplog: pytest.LogCaptureFixture, age_s: float, took_s: float, fails: bool) -> None:
    now = [NOW]
    engine = SlowEcho(now, took_s, fails)
    processor = QueryProcessor(engine, "dlq", clock=lambda: now[0])
    replies = RecordedReplies()
    answering = QueryAnswering(processor, replies, FakePublisher(),
                               AnsweredRequests(MemoryAnsweredRecord(), retry_after_s=10.0,
                                                clock=lambda: now[0],
                                                wall_clock=lambda: now[0]),
                               retry_initial_s=0.01, retry_max_s=0.01)
    with caplog.at_level(logging.INFO, logger="streams.query.processor"):
        for n in (1, 2):  # the second within a second of the first: not told
            r = request(f"r-{n}".encode(), age_s=age_s, timeout_ms=300, offset=n)
            await answering(dataclasses.replace(r, timestamp=now[0] - age_s))
    assert len(replies.sent) == 2
    lines = [r.getMessage() for r in caplog.records if "after it was sent" in r.getMessage()]
    if age_s + took_s <= 0.3:
        assert lines == []
        return
    [line] = lines
    m = LATE.fullmatch(line)
    assert m is not None, line
    total, taken_up, handled = (int(g) for g in m.groups())
    assert total == round((age_s + took_s) * 1000)
    assert handled == pytest.approx(took_s * 1000, abs=60)
    assert taken_up == pytest.approx(age_s * 1000, abs=60)


class SlowDurable(MemoryDurableAnswers):
    """A database whose writes of the record take ``delay_s``."""

    def __init__(self, delay_s: float) -> None:
        super().__init__()
        self.delay_s = delay_s

    async def add(self, keys: Sequence[str], now: datetime) -> None:
        await asyncio.sleep(self.delay_s)
        await super().add(keys, now)


async def test_a_request_drained_while_its_record_is_written_is_answered_and_committed(
        ) -> None:
    """The query consumer lets a request's slot go once its reply is out, and waits for
    its record's database copy outside the slots. A revocation whose drain times out
    meanwhile still gives that write the grace: the request ends answered and is
    committed, and the next owner — Redis down — finds it in the database."""
    from tests.agents.test_query_consumer import P0, P1, TOPIC, FakeKafka, Record, last_commit

    durable = SlowDurable(0.2)
    redis = MemoryAnsweredRecord()
    redis.down = True  # only the database copy tells the next owner
    answering, _, replies, _, _ = build(record=redis, durable=durable)
    kafka = FakeKafka()
    config = QueryConsumerConfig(broker="kafka://x", topic=TOPIC, group_id="g", client_id="c",
                                 concurrency=4, read_ahead=8, drain_timeout_s=0.05)
    q = QueryConsumer(config, connect=lambda c: kafka)
    q.start(answering, shed=answering.shed)
    await eventually(lambda: kafka.listener is not None, 5, "the subscription")
    await kafka.rebalance({P0})
    let_go = counter("memstream_query_abandoned_total")
    r = request(b"c-1")
    kafka.queued[P0] = [Record(TOPIC, 0, 0, key=r.key, value=r.value, headers=tuple(r.headers))]
    kafka.ends[P0] = 1
    await eventually(lambda: len(replies.sent) == 1, 5, "the reply out")
    await kafka.rebalance({P1})  # drained while the database copy is written
    assert last_commit(kafka, P0) == 1
    assert counter("memstream_query_abandoned_total") == let_go
    after, engine, again, _, _ = build(record=redis, durable=durable)
    await whole(after, request(b"c-1"))
    assert again.sent == [] and engine.asked == []
    await q.stop()


async def test_a_database_write_that_hangs_is_given_up() -> None:
    """The record's database copy is a safeguard, never a gate: a write that hangs is
    given up after its timeout, and the requests waiting for it are done."""
    durable = SlowDurable(3600.0)
    answering, _, replies, _, _ = build(durable=durable)
    grouped = answering.answered._grouped
    assert grouped is not None
    grouped.write_timeout_s = 0.05
    await asyncio.wait_for(whole(answering, request(b"c-1")), 2.0)
    assert len(replies.sent) == 1 and durable.keys == set()
