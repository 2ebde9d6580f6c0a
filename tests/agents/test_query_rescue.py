"""Requests of another worker's partition, taken over when nobody began them: one
worker answers, the owner coming later finds the answer, and whatever is not a
plain valid request is left to the owner untouched and uncounted."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from prometheus_client import REGISTRY

from streams.query.answered import AnsweredRequests, request_key
from streams.query.answering import QueryAnswering
from streams.query.processor import QueryProcessor
from streams.query.rescue import Rescuer
from streams.testing.query import (
    EchoLookup,
    MemoryAnsweredRecord,
    MemoryDurableAnswers,
    RecordedReplies,
)
from streams.wire.envelope import SourceRecord
from streams.wire.headers import header
from streams.wire.signing import Signing
from streams.wire.spring_reply import request_headers
from tests.agents.fakes import FakePublisher
from tests.agents.test_query_answering import NOW, build, counter, key_of, request, whole


def standby(record: MemoryAnsweredRecord, *, signing: Signing | None = None,
            ) -> tuple[QueryAnswering, EchoLookup, RecordedReplies, FakePublisher]:
    """Another worker's answering, sharing ``record`` (one Redis)."""
    engine, replies, dlq = EchoLookup(), RecordedReplies(), FakePublisher()
    processor = QueryProcessor(engine, "dlq", clock=lambda: NOW, signing=signing)
    answered = AnsweredRequests(record, retry_after_s=10.0, clock=lambda: NOW,
                                wall_clock=lambda: NOW)
    return (QueryAnswering(processor, replies, dlq, answered, retry_initial_s=0.01,
                           retry_max_s=0.01), engine, replies, dlq)


async def test_a_request_nobody_began_is_answered_once_and_its_owner_finds_it_answered() -> None:
    owner, owner_engine, owner_replies, _, record = build()
    standbys = [standby(record) for _ in range(3)]
    taken = await asyncio.gather(*(s.rescue(request(b"r-1")) for s, *_ in standbys))
    assert sorted(taken) == [False, False, True]
    assert sum(len(replies.sent) for _, _, replies, _ in standbys) == 1
    assert record.answered == {key_of(b"r-1")} and record.began == {}

    duplicates = counter("memstream_query_duplicates_total")
    await owner(request(b"r-1"))  # the owner comes to it later
    assert owner_replies.sent == [] and owner_engine.asked == []
    assert counter("memstream_query_duplicates_total") == duplicates + 1


async def test_a_request_its_owner_began_or_answered_is_left_to_it() -> None:
    owner, _, owner_replies, _, record = build()
    await owner(request(b"done"))
    await record.claim(key_of(b"begun"), int(NOW * 1000))  # under way on its owner
    rescuer, engine, replies, _ = standby(record)
    assert not await rescuer.rescue(request(b"done"))
    assert not await rescuer.rescue(request(b"begun"))
    assert replies.sent == [] and engine.asked == []
    assert len(owner_replies.sent) == 1


async def test_without_redis_nothing_is_taken_over() -> None:
    record = MemoryAnsweredRecord()
    record.down = True
    rescuer, engine, replies, _ = standby(record)
    assert not await rescuer.rescue(request(b"r"))
    assert replies.sent == [] and engine.asked == []


def _unsigned() -> SourceRecord:
    return request(b"u")


@pytest.mark.parametrize(("name", "rec"), [
    ("no reply topic", request(b"x", headers=[])),
    ("bad reply headers", request(b"x", headers=[("kafka_replyTopic", b"r"),
                                                 ("kafka_replyPartition", b"oops")])),
    ("unreadable", request(b"x", value=b"{not json")),
    ("invalid", request(b"x", value=json.dumps({"tenant_id": "t"}).encode())),
    ("caller gave up", request(b"x", age_s=1.5)),
    ("no correlation id", request(b"x", headers=[("kafka_replyTopic", b"replies")])),
])
async def test_anything_but_a_valid_awaited_request_is_left_unsent_and_uncounted(
        name: str, rec: SourceRecord) -> None:
    record = MemoryAnsweredRecord()
    rescuer, engine, replies, dlq = standby(record)
    before = {m: counter(m) for m in ("memstream_query_expired_total",
                                      "memstream_dead_letters_total",
                                      "memstream_query_replies_total")}
    assert not await rescuer.rescue(rec)
    assert replies.sent == [] and dlq.sent == [] and engine.asked == []
    assert record.began == {} and record.answered == set()
    assert {m: counter(m) for m in before} == before


async def test_an_unsigned_request_is_left_to_its_owner_to_refuse() -> None:
    record = MemoryAnsweredRecord()
    rescuer, engine, replies, _ = standby(record, signing=Signing({"t": "k" * 32}))
    assert not await rescuer.rescue(_unsigned())
    assert replies.sent == [] and engine.asked == [] and record.calls == 0


def _at(partition: int, produced: float, cid: bytes, timeout_ms: int = 1000) -> SourceRecord:
    doc = {"tenant_id": "t", "user_id": "u", "agent_id": "a", "message": "hi",
           "options": {"timeout_ms": timeout_ms}}
    return SourceRecord("q", partition, 0, b"t/u", json.dumps(doc).encode(),
                        request_headers("replies", cid), timestamp=produced)


async def test_the_rescuer_hands_over_only_other_partitions_requests_when_due() -> None:
    handed: list[tuple[bytes, float]] = []

    async def answer(rec: SourceRecord) -> bool:
        handed.append((header(rec.headers, "kafka_correlationId") or b"", time.time()))
        return True

    held = {0}
    rescuer = Rescuer(answer, lambda: held, after_s=0.2, share=0.5)
    runner = asyncio.get_running_loop().create_task(rescuer.run())
    try:
        now = time.time()
        rescuer.offer(_at(0, now, b"own"))  # this worker's own partition
        rescuer.offer(_at(1, now, b"slow"))  # due after 0.2 s
        rescuer.offer(_at(1, now, b"short", timeout_ms=200))  # due at half its wait: 0.1 s
        no_time = _at(2, now, b"no-time")
        rescuer.offer(SourceRecord(no_time.topic, 2, 0, None, no_time.value, no_time.headers,
                                   timestamp=None))
        # produced 5 s ago by this clock (a producer's clock behind, or a backlog): not
        # at once, but the delay after it was read, less the reader's lag
        rescuer.offer(_at(1, now - 5, b"late"))
        await asyncio.sleep(0.4)
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
    assert sorted(cid for cid, _ in handed) == [b"late", b"short", b"slow"]
    assert handed[-1][0] == b"slow"
    at = dict(handed)
    assert 0.1 - 0.02 <= at[b"late"] - now < 0.2
    assert 0.1 <= at[b"short"] - now < 0.2
    assert 0.2 <= at[b"slow"] - now < 0.3


async def test_while_its_own_group_rebalances_the_rescuer_hands_over_at_once() -> None:
    """In an eager rebalance no member reads: requests waiting for their time, and those
    offered meanwhile, are handed over without waiting for it."""
    handed: list[tuple[bytes, float]] = []

    async def answer(rec: SourceRecord) -> bool:
        handed.append((header(rec.headers, "kafka_correlationId") or b"", time.time()))
        return True

    stopped = False
    rescuer = Rescuer(answer, set, after_s=0.4, share=0.5, stopped=lambda: stopped)
    runner = asyncio.get_running_loop().create_task(rescuer.run())
    try:
        now = time.time()
        rescuer.offer(_at(1, now, b"waiting"))  # due at 0.4 s
        await asyncio.sleep(0.1)
        assert handed == []
        stopped = True  # the group begins to rebalance
        await asyncio.sleep(0.1)
        rescuer.offer(_at(2, time.time(), b"offered"))
        await asyncio.sleep(0.05)
        stopped = False
        rescuer.offer(_at(3, time.time(), b"after"))  # waits again for its time
        await asyncio.sleep(0.1)
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
    at = dict(handed)
    assert set(at) == {b"waiting", b"offered"}
    assert at[b"waiting"] - now < 0.3


class Held:
    """A rescue that holds each request it is given until ``gate`` opens; left."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started: list[SourceRecord] = []

    async def __call__(self, rec: SourceRecord) -> bool:
        self.started.append(rec)
        await self.gate.wait()
        return False


async def test_the_rescuer_is_bounded_in_what_waits_and_what_runs() -> None:
    answer = Held()
    gate, started = answer.gate, answer.started

    rescuer = Rescuer(answer, set, after_s=0.05, concurrency=2, max_pending=3)
    dropped = dropped_count()
    now = time.time()
    for i in range(5):
        rescuer.offer(_at(1, now, f"c{i}".encode()))
    assert rescuer.pending() == 3
    runner = asyncio.get_running_loop().create_task(rescuer.run())
    try:
        await asyncio.sleep(0.15)
        assert len(started) == 2  # two slots; the third due waits for one
        assert rescuer.pending() == 1
        assert dropped_count() == dropped + 2  # two dropped when offered (over max_pending)
        gate.set()
        await asyncio.sleep(0.1)
        assert len(started) == 3 and rescuer.pending() == 0
    finally:
        gate.set()
        await asyncio.sleep(0)
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
    assert dropped_count() == dropped + 2


async def test_the_owner_waits_for_an_attempt_under_way_elsewhere_and_does_not_answer_twice(
        ) -> None:
    owner, engine, replies, _, record = build()
    taken = await AnsweredRequests(record, retry_after_s=10.0, wall_clock=lambda: NOW
                                   ).take_over(key_of(b"w-1"))
    assert taken  # another worker began it, and records its answer 60 ms later

    async def answered_elsewhere() -> None:
        await asyncio.sleep(0.06)
        await record.remember(key_of(b"w-1"))

    elsewhere = asyncio.get_running_loop().create_task(answered_elsewhere())
    waited = counter("memstream_query_waited_for_total")
    began = time.monotonic()
    await owner(request(b"w-1"))
    await elsewhere
    assert replies.sent == []  # the other worker's reply is the one
    assert 0.05 <= time.monotonic() - began < 0.4
    assert counter("memstream_query_waited_for_total") == waited + 1
    assert len(engine.asked) <= 1  # made while waiting (a likely-new request), then dropped


async def test_an_attempt_that_records_nothing_is_waited_for_only_half_the_callers_wait() -> None:
    owner, _, replies, _, record = build()
    short = request(b"w-2", timeout_ms=200)
    assert short.value is not None
    record.began[request_key("t", "replies", None, b"w-2", short.value)] = int(NOW * 1000)
    began = time.monotonic()  # begun elsewhere just now, and that attempt died
    await owner(short)
    assert len(replies.sent) == 1  # answered here after all
    assert 0.09 <= time.monotonic() - began < 0.3  # half of its 200 ms
    record.began[key_of(b"w-3")] = int((NOW - 5) * 1000)  # an old attempt: no wait
    began = time.monotonic()
    await owner(request(b"w-3"))
    assert len(replies.sent) == 2 and time.monotonic() - began < 0.05


async def test_a_request_answered_while_redis_was_away_is_not_taken_over() -> None:
    durable = MemoryDurableAnswers()
    owner, _, owner_replies, _, record = build(durable=durable)
    record.down = True  # the owner answers while Redis is away: the database has it
    await whole(owner, request(b"away"))
    assert len(owner_replies.sent) == 1 and durable.keys == {key_of(b"away")}
    record.down = False  # Redis back, empty
    other = AnsweredRequests(record, retry_after_s=10.0, durable=durable,
                             wall_clock=lambda: NOW)
    assert not await other.take_over(key_of(b"away"))
    assert await other.take_over(key_of(b"fresh"))
    durable.down = True  # the database away: the quick copy decides
    assert await other.take_over(key_of(b"fresh-2"))


def dropped_count() -> float:
    return REGISTRY.get_sample_value("memstream_query_rescues_total",
                                     {"outcome": "dropped"}) or 0.0


async def test_requests_due_together_start_no_more_checks_than_the_bound() -> None:
    answer = Held()
    gate, started = answer.gate, answer.started

    rescuer = Rescuer(answer, set, after_s=0.01, concurrency=2, max_pending=10_000)
    before = dropped_count()
    now = time.time()
    for i in range(1000):  # a flood read in one fetch: all due at once
        rescuer.offer(_at(1, now, f"c{i}".encode()))
    runner = asyncio.get_running_loop().create_task(rescuer.run())
    try:
        await asyncio.sleep(0.1)
        assert len(started) == 2 and len(rescuer._tasks) == 2
        # the others wait for a free check while their callers wait (1 s), then go
        assert rescuer.pending() == 998 and dropped_count() == before
        await asyncio.sleep(1.1)
        assert len(started) == 2 and rescuer.pending() == 0
        assert dropped_count() == before + 998
    finally:
        gate.set()
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)


async def test_a_timestamp_ahead_of_the_clock_counts_as_now_and_big_bodies_are_left() -> None:
    handed: list[bytes] = []

    async def answer(rec: SourceRecord) -> bool:
        handed.append(header(rec.headers, "kafka_correlationId") or b"")
        return True

    rescuer = Rescuer(answer, set, after_s=0.05, max_pending=100)
    now = time.time()
    for i, ahead in enumerate((3600.0, 9.2e15)):  # a producer's clock an hour ahead; absurd
        rescuer.offer(_at(1, now + ahead, f"ahead{i}".encode()))
    big = _at(1, now, b"big")
    rescuer.offer(SourceRecord(big.topic, 1, 0, None, b" " * 70_000 + (big.value or b""),
                               big.headers, timestamp=now))
    assert rescuer.pending() == 2
    runner = asyncio.get_running_loop().create_task(rescuer.run())
    try:
        await asyncio.sleep(0.2)
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
    assert sorted(handed) == [b"ahead0", b"ahead1"] and rescuer.pending() == 0


async def test_a_request_taken_over_gets_no_refusal_from_its_owner_over_quota() -> None:
    from streams.quotas.book import QuotaBook
    from streams.quotas.rules import Limit

    record = MemoryAnsweredRecord()
    owner_book = QuotaBook("queries", Limit(rate=0.001, burst=1))
    standby_book = QuotaBook("queries", Limit(rate=0.001, burst=1))
    engine, owner_replies, dlq = EchoLookup(), RecordedReplies(), FakePublisher()
    owner = QueryAnswering(
        QueryProcessor(engine, "dlq", clock=lambda: NOW, quotas=owner_book), owner_replies,
        dlq, AnsweredRequests(record, retry_after_s=10.0, wall_clock=lambda: NOW),
        retry_initial_s=0.01, retry_max_s=0.01, maybe_seen=lambda rec: False)
    rescuer_replies = RecordedReplies()
    rescuer = QueryAnswering(
        QueryProcessor(EchoLookup(), "dlq", clock=lambda: NOW, quotas=standby_book),
        rescuer_replies, FakePublisher(),
        AnsweredRequests(record, retry_after_s=10.0, wall_clock=lambda: NOW),
        retry_initial_s=0.01, retry_max_s=0.01)
    await owner(request(b"earlier"))  # the tenant's one token on the owner
    assert await rescuer.rescue(request(b"rescued"))  # counted on the rescuer's book
    await owner(request(b"rescued", offset=1))  # the owner comes to it over quota
    assert len(rescuer_replies.sent) == 1
    assert len(owner_replies.sent) == 1  # "earlier" only: no refusal after the answer
    assert not await rescuer.rescue(request(b"next"))  # the rescuer's token was taken
    await owner(request(b"fresh", offset=2))  # a new request over quota is refused
    assert json.loads(owner_replies.sent[-1].value or b"{}")["error"]["code"] == "over_quota"
