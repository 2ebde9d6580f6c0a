"""Queries per second per tenant: a loud tenant over its quota gets ``over_quota``
replies at once — no engine work, no Redis round trip — while a calm tenant's
requests in the same stream are answered; a request taken over by another worker
counts against the quota once, where its owner takes it. Under load, a tenant with
most of the queries answered lately is refused, the others not."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from prometheus_client import REGISTRY

from streams.query.answered import AnsweredRequests, request_key
from streams.query.answering import QueryAnswering
from streams.query.processor import QueryProcessor
from streams.quotas.book import Decision, QuotaBook
from streams.quotas.load_share import LoadShare
from streams.quotas.rules import Limit
from streams.testing.query import EchoLookup, MemoryAnsweredRecord, RecordedReplies
from streams.wire.envelope import SourceRecord
from streams.wire.spring_reply import request_headers
from tests.agents.fakes import FakePublisher

NOW = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def request(tenant: str, n: int, *, offset: int = 0, at: float = NOW) -> SourceRecord:
    cid = f"{tenant}-{n}".encode()
    doc: dict[str, Any] = {"request_id": cid.decode(), "tenant_id": tenant, "user_id": "u",
                           "agent_id": "a", "message": "hi"}
    return SourceRecord("q", 0, offset, f"{tenant}/u".encode(), json.dumps(doc).encode(),
                        request_headers("replies", cid), timestamp=at)


def build(quotas: QuotaBook, clock: Clock, record: MemoryAnsweredRecord | None = None,
          load: LoadShare | None = None, *, first_delivery: bool = False,
          ) -> tuple[QueryAnswering, EchoLookup, RecordedReplies, MemoryAnsweredRecord]:
    """``first_delivery``: the consumer knows no request was delivered before (they are
    answered while asked whether they were answered before)."""
    engine, replies, record = EchoLookup(), RecordedReplies(), record or MemoryAnsweredRecord()
    processor = QueryProcessor(engine, "dlq", clock=clock, quotas=quotas, load=load,
                               monotonic=clock)
    answered = AnsweredRequests(record, retry_after_s=10.0, clock=clock, wall_clock=clock)
    return (QueryAnswering(processor, replies, FakePublisher(), answered, retry_initial_s=0.01,
                           retry_max_s=0.01, maybe_seen=lambda rec: not first_delivery),
            engine, replies, record)


def errors(replies: RecordedReplies, tenant: str) -> list[str | None]:
    """The error code of each reply to ``tenant`` (None: answered), in order."""
    out = []
    for r in replies.sent:
        body = json.loads(r.value or b"{}")
        if body["request_id"].startswith(f"{tenant}-"):
            out.append(body["error"]["code"] if body["error"] else None)
    return out


def decisions(tenant: str, decision: str) -> float:
    return REGISTRY.get_sample_value("memstream_quota_decisions_total", {
        "tenant": tenant, "quota": "queries", "decision": decision}) or 0.0


async def test_a_loud_tenant_over_its_quota_is_refused_and_a_calm_one_answered() -> None:
    clock = Clock()
    quotas = QuotaBook("queries", Limit(5.0, 5.0), {"calm-a": Limit(5.0, 5.0)})
    answering, engine, replies, record = build(quotas, clock)
    offset = 0
    for second in range(3):  # loud: 50 a second; calm: 2 a second, in the same stream
        for i in range(50):
            clock.now = NOW + second + i / 50
            await answering(request("loud-a", second * 50 + i, offset=offset, at=clock.now))
            offset += 1
            if i % 25 == 0:
                await answering(request("calm-a", second * 2 + i // 25, offset=offset,
                                        at=clock.now))
                offset += 1
    assert errors(replies, "calm-a") == [None] * 6
    loud = errors(replies, "loud-a")
    assert len(loud) == 150  # every request has its reply
    assert loud[:5] == [None] * 5  # the burst
    answered = loud.count(None)
    assert 5 + 2 * 5 <= answered <= 5 + 3 * 5  # then 5 a second
    assert set(loud) == {None, "over_quota"}
    # refused without engine work; one round trip asks whether it was answered before
    assert sum(q.tenant_id == "loud-a" for q in engine.asked) == answered
    assert record.calls == 2 * (answered + 6) + (150 - answered)  # a refusal: no record
    assert decisions("loud-a", "refused") == 150 - answered
    assert decisions("loud-a", "allowed") == answered
    assert decisions("calm-a", "allowed") == 6


async def test_the_over_quota_reply_says_which_quota_and_when_to_retry() -> None:
    clock = Clock()
    answering, _, replies, _ = build(QuotaBook("queries", Limit(2.0, 1.0)), clock)
    await answering(request("loud-b", 0))
    await answering(request("loud-b", 1))
    body = json.loads(replies.sent[-1].value or b"{}")
    assert body["tenant_id"] == "loud-b" and body["request_id"] == "loud-b-1"
    assert body["error"] == {"code": "over_quota", "message": (
        "over the queries quota of tenant 'loud-b' (2 a second, 1 at once): retry in 0.500 s")}
    assert body["memories"] == [] and body["user_profile"] == ""


async def test_a_request_taken_over_counts_once_where_answered_and_over_quota_is_left() -> None:
    clock = Clock()
    record = MemoryAnsweredRecord()
    owner_quotas = QuotaBook("queries", Limit(1.0, 2.0))
    owner, _, owner_replies, _ = build(owner_quotas, clock, record)
    rescuer_quotas = QuotaBook("queries", Limit(1.0, 2.0))
    rescuer, engine, replies, _ = build(rescuer_quotas, clock, record)
    await rescuer(request("loud-c", 0))  # the rescuer's own consumer: its quota is spent
    await rescuer(request("loud-c", 1))
    assert not await rescuer.rescue(request("loud-c", 2))  # over it: left to its owner
    assert rescuer_quotas.tally("loud-c", clock()).refused == 0  # looked at, not counted
    await owner(request("loud-c", 2))
    assert errors(owner_replies, "loud-c") == [None]

    assert await rescuer.rescue(request("calm-c", 0))  # answered here: counted here
    assert rescuer_quotas.tally("calm-c", clock()).allowed == 1
    await owner(request("calm-c", 0))  # its owner, coming later, finds it answered
    assert owner_replies.sent[1:] == []
    assert owner_quotas.tally("calm-c", clock()).allowed == 0
    assert errors(replies, "calm-c") == [None]


async def test_a_request_answered_elsewhere_takes_nothing_from_its_owner_s_quota() -> None:
    """Its owner answers it while asking whether it was answered before: the token it
    took comes back and nothing is counted when another worker had answered it."""
    clock = Clock()
    record = MemoryAnsweredRecord()
    rescuer, _, _, _ = build(QuotaBook("queries", Limit(1.0, 2.0)), clock, record)
    owner_quotas = QuotaBook("queries", Limit(1.0, 2.0))
    load = LoadShare(0.05)
    owner, _, owner_replies, _ = build(owner_quotas, clock, record, load, first_delivery=True)
    assert await rescuer.rescue(request("taken-d", 0))
    await owner(request("taken-d", 0))  # the same request, come to its owner later
    assert owner_replies.sent == []
    tally = owner_quotas.tally("taken-d", clock())
    assert (tally.allowed, tally.refused, tally.tokens) == (0, 0, 2.0)
    assert decisions("taken-d", "allowed") == 1  # the rescuer's, only
    assert load.queries.count("taken-d", clock()) == 0.0
    await owner(request("taken-d", 1, offset=1))  # a new one: taken and counted
    assert errors(owner_replies, "taken-d") == [None]
    tally = owner_quotas.tally("taken-d", clock())
    assert (tally.allowed, tally.tokens) == (1, 1.0)


async def test_a_token_spent_while_a_request_was_asked_about_refuses_it() -> None:
    """Two requests with one token left, each asked about while the other is: the
    second finds the token spent, and is refused over the quota as any other."""
    clock = Clock()
    record = MemoryAnsweredRecord()
    record.gate = asyncio.Event()
    quotas = QuotaBook("queries", Limit(1.0, 1.0))
    answering, engine, replies, _ = build(quotas, clock, record)  # maybe delivered before
    both = asyncio.gather(answering(request("race-e", 0)),
                          answering(request("race-e", 1, offset=1)))
    await asyncio.sleep(0.01)  # both admitted, both asked about
    record.gate.set()
    await both
    assert sorted(errors(replies, "race-e"), key=str) == [None, "over_quota"]
    tally = quotas.tally("race-e", clock())
    assert (tally.allowed, tally.refused) == (1, 1)
    assert len(engine.asked) == 1
    assert decisions("race-e", "allowed") == 1 and decisions("race-e", "refused") == 1


class PeekSaysYes(QuotaBook):
    """A book whose look ahead finds a token where its take finds none (a clock gone
    back between the two)."""

    def peek(self, tenant: str, now: float) -> Decision:
        return Decision(self.quota, tenant, True, self.limit(tenant))


async def test_a_token_not_taken_is_not_given_back() -> None:
    clock = Clock()
    record = MemoryAnsweredRecord()
    quotas = PeekSaysYes("queries", Limit(1.0, 2.0))
    answering, _, replies, _ = build(quotas, clock, record, first_delivery=True)
    await answering(request("back-f", 0))
    await answering(request("back-f", 1, offset=1))  # the bucket is empty now
    third = request("back-f", 2, offset=2)
    record.answered.add(request_key("back-f", "replies", None, b"back-f-2", third.value or b""))
    await answering(third)  # answered elsewhere: nothing sent, nothing given back
    assert errors(replies, "back-f") == [None, None]
    assert quotas.tally("back-f", clock()).tokens == pytest.approx(0.0)
    await answering(request("back-f", 3, offset=3))  # a new one finds no token: refused
    assert errors(replies, "back-f") == [None, None, "over_quota"]
    tally = quotas.tally("back-f", clock())
    assert (tally.allowed, tally.refused, tally.tokens) == (2, 1, pytest.approx(0.0))


async def test_memory_stays_bounded_with_many_tenants() -> None:
    clock = Clock()
    quotas = QuotaBook("queries", Limit(5.0, 5.0), max_tenants=100)
    answering, _, replies, _ = build(quotas, clock)
    for i in range(2000):
        await answering(request(f"many-{i}", 0, offset=i))
    assert len(quotas) == 100
    assert errors(replies, "many-1999") == [None]
    assert REGISTRY.get_sample_value("memstream_quota_decisions_total", {
        "tenant": "many-0", "quota": "queries", "decision": "allowed"}) is None


async def test_a_shed_request_is_refused_without_the_engine_and_counted_shed() -> None:
    clock = Clock()
    quotas = QuotaBook("queries", Limit(100.0, 100.0))
    answering, engine, replies, record = build(quotas, clock)
    await answering.shed(request("shed-a", 0))
    body = json.loads(replies.sent[-1].value or b"{}")
    assert body["tenant_id"] == "shed-a" and body["request_id"] == "shed-a-0"
    assert body["error"]["code"] == "over_quota"
    assert body["error"]["message"].startswith(
        "the requests of tenant 'shed-a' exceed what this worker can take now")
    assert engine.asked == []
    assert decisions("shed-a", "shed") == 1 and decisions("shed-a", "refused") == 0
    tally = quotas.tally("shed-a", clock())
    assert (tally.allowed, tally.refused, tally.tokens) == (0, 1, 100.0)  # nothing taken
    assert record.calls == 1  # asked whether it was answered before; not recorded


async def test_a_request_answered_before_is_not_shed() -> None:
    clock = Clock()
    quotas = QuotaBook("queries", Limit(100.0, 100.0))
    answering, _, replies, _ = build(quotas, clock)
    await answering(request("shed-b", 0))
    await answering.shed(request("shed-b", 0))  # redelivered, and its queue full
    assert errors(replies, "shed-b") == [None]  # the answer only, no refusal after it
    assert decisions("shed-b", "shed") == 0


async def test_under_load_the_tenant_with_most_of_the_queries_is_refused() -> None:
    clock = Clock()
    quotas = QuotaBook("queries", Limit(1000.0, 1000.0))  # far from the quota of queries
    load = LoadShare(0.05)
    answering, engine, replies, record = build(quotas, clock, load=load)
    offset = 0

    async def second(n: int, *, lag_s: float) -> None:
        nonlocal offset
        for i in range(40):  # loud: 40 a second; calm: 4 a second
            clock.now = NOW + n + i / 40
            if i % 4 == 0:
                load.note_lag(lag_s, clock.now)
            await answering(request("heavy-a", n * 40 + i, offset=offset, at=clock.now))
            offset += 1
            if i % 10 == 0:
                await answering(request("light-a", n * 4 + i // 10, offset=offset,
                                        at=clock.now))
                offset += 1

    await second(0, lag_s=0.0)  # the worker keeps up: everybody answered
    assert set(errors(replies, "heavy-a")) == {None}
    for n in range(1, 4):  # it lags
        await second(n, lag_s=0.2)
    heavy, light = errors(replies, "heavy-a"), errors(replies, "light-a")
    assert light == [None] * 16
    assert len(heavy) == 160 and set(heavy) == {None, "over_quota"}
    answered_loaded = heavy[40:].count(None)
    assert 0 < answered_loaded <= 3 * 12 + 10  # about three times light's, not nothing
    assert decisions("heavy-a", "overloaded") == 120 - answered_loaded
    assert decisions("light-a", "overloaded") == 0
    assert sum(q.tenant_id == "heavy-a" for q in engine.asked) == 40 + answered_loaded
    refusal = next(b for b in (json.loads(r.value or b"{}") for r in replies.sent)
                   if b["error"])
    assert refusal["error"]["message"] == (
        "this worker is loaded and tenant 'heavy-a' had most of the queries it answered "
        "lately: retry in 1 s")
    await second(5, lag_s=0.0)  # the load is over (a second after the last lag)
    assert errors(replies, "heavy-a")[160:] == [None] * 40
