"""One request to its reply: expired and redelivered requests are not answered,
answered ones are remembered, Redis failures never keep a request unanswered."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from prometheus_client import REGISTRY
from redis.exceptions import ConnectionError as RedisConnectionError

from streams.query import answering as answering_module
from streams.query.answered import AnsweredRequests, request_key
from streams.query.answering import QueryAnswering, ReplySent
from streams.query.processor import QueryProcessor
from streams.query.rules.reply_targets import ReplyTargets
from streams.wire.envelope import Outgoing, SourceRecord
from streams.wire.headers import header
from streams.wire.query import MemoryQuery, MemoryReply
from streams.wire.spring_reply import request_headers
from tests.agents.fakes import FakePublisher

NOW = 1_800_000_000.0


class Engine:
    def __init__(self) -> None:
        self.asked: list[MemoryQuery] = []

    async def answer(self, q: MemoryQuery) -> MemoryReply:
        self.asked.append(q)
        return MemoryReply(request_id=q.request_id, tenant_id=q.tenant_id)


class FakeRedis:
    """The commands the record uses, in pipelines; ``calls`` counts round trips."""

    def __init__(self) -> None:
        self.keys: dict[str, tuple[bytes, int]] = {}
        self.down = False
        self.calls = 0

    def pipeline(self, transaction: bool = True) -> FakePipeline:
        assert not transaction
        return FakePipeline(self)


class FakePipeline:
    def __init__(self, redis: FakeRedis) -> None:
        self.redis = redis
        self.queued: list[Callable[[], Any]] = []

    def exists(self, key: str) -> None:
        self.queued.append(lambda: int(key in self.redis.keys))

    def get(self, key: str) -> None:
        self.queued.append(lambda: self.redis.keys[key][0] if key in self.redis.keys else None)

    def set(self, key: str, value: bytes, ex: int, nx: bool = False) -> None:
        def run() -> bool | None:
            if nx and key in self.redis.keys:
                return None
            self.redis.keys[key] = (value, ex)
            return True
        self.queued.append(run)

    def delete(self, key: str) -> None:
        self.queued.append(lambda: int(self.redis.keys.pop(key, None) is not None))

    async def execute(self) -> list[Any]:
        self.redis.calls += 1
        if self.redis.down:
            raise RedisConnectionError("connection refused")
        return [run() for run in self.queued]


class Replies:
    def __init__(self) -> None:
        self.sent: list[Outgoing] = []
        self.fail = False

    async def deliver(self, r: Outgoing) -> bool:
        if self.fail:
            return False
        self.sent.append(r)
        return True


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


class FakeDurable:
    """The database's copy of the record."""

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.writes: list[list[str]] = []
        self.reads = 0
        self.down = False

    async def add(self, keys: Sequence[str], now: datetime) -> None:
        if self.down:
            raise ConnectionError("database down")
        self.writes.append(list(keys))
        self.keys.update(keys)

    async def exists(self, key: str) -> bool:
        self.reads += 1
        if self.down:
            raise ConnectionError("database down")
        return key in self.keys


def build(redis: FakeRedis | None = None, durable: FakeDurable | None = None,
          maybe_seen: Callable[[SourceRecord], bool] = lambda rec: True,
          reply_sent: ReplySent | None = None,
          ) -> tuple[QueryAnswering, Engine, Replies, FakePublisher, FakeRedis]:
    engine, replies, dlq = Engine(), Replies(), FakePublisher()
    redis = redis or FakeRedis()
    processor = QueryProcessor(engine, "dlq", clock=lambda: NOW)  # type: ignore[arg-type]
    answered = AnsweredRequests(redis, prefix="ms", retry_after_s=10.0,  # type: ignore[arg-type]
                                clock=lambda: NOW, durable=durable, wall_clock=lambda: NOW)
    return (QueryAnswering(processor, replies.deliver, dlq, answered, retry_initial_s=0.01,
                           retry_max_s=0.01, maybe_seen=maybe_seen, reply_sent=reply_sent),
            engine, replies, dlq, redis)


def counter(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


async def test_an_answered_request_is_remembered_and_its_redelivery_not_answered() -> None:
    answering, engine, replies, _, redis = build()
    duplicates = counter("memstream_query_duplicates_total")
    await answering(request(b"c-1"))
    assert len(replies.sent) == 1 and header(replies.sent[0].headers,
                                             "kafka_correlationId") == b"c-1"
    assert redis.keys == {f"ms:answered:replies:{b'c-1'.hex()}": (b"1", 120)}
    await answering(request(b"c-1", offset=1))  # the same request, redelivered
    assert len(replies.sent) == 1 and len(engine.asked) == 1
    assert counter("memstream_query_duplicates_total") == duplicates + 1
    await answering(request(b"c-2", offset=2))
    assert len(replies.sent) == 2


async def test_a_request_older_than_its_timeout_is_counted_and_not_answered() -> None:
    answering, engine, replies, _, redis = build()
    expired = counter("memstream_query_expired_total")
    await answering(request(b"late", age_s=1.5))  # default timeout_ms: 1000
    await answering(request(b"long", age_s=1.5, timeout_ms=2000))
    await answering(request(b"ancient", age_s=3600, timeout_ms=60_000))
    assert [r.request_id for r in engine.asked] == ["long"]
    assert len(replies.sent) == 1
    assert counter("memstream_query_expired_total") == expired + 2
    # an expired request costs no Redis round trip: "long" is checked and remembered
    assert redis.calls == 2


async def test_with_redis_down_every_request_is_answered_and_redis_is_skipped_a_while() -> None:
    redis = FakeRedis()
    redis.down = True
    answering, _, replies, _, _ = build(redis)
    await answering(request(b"a"))
    await answering(request(b"a", offset=1))  # cannot tell it was answered: answered again
    assert len(replies.sent) == 2
    assert redis.calls == 1  # skipped after the failure


SENDING_LOST = f"ms:sending:replies:{b'lost'.hex()}"


async def test_a_lost_reply_is_not_remembered() -> None:
    answering, _, replies, _, redis = build()
    replies.fail = True
    await answering(request(b"lost"))
    assert redis.keys == {SENDING_LOST: (str(int(NOW * 1000)).encode(), 120)}  # begun only
    replies.fail = False
    await answering(request(b"lost", offset=1))
    assert len(replies.sent) == 1


async def test_a_request_with_no_reply_topic_is_dead_lettered_even_when_the_broker_fails() -> None:
    answering, _, replies, dlq, redis = build()
    dlq.fail_next = 2
    await answering(request(b"x", headers=[]))
    assert replies.sent == [] and len(dlq.on("dlq")) == 1
    assert header(dlq.sent[0].headers, "memstream.error.reason") == b"no_reply_topic"
    assert redis.calls == 0


async def test_a_request_without_correlation_id_is_answered_and_not_remembered() -> None:
    answering, _, replies, _, redis = build()
    await answering(request(b"n", headers=[("kafka_replyTopic", b"replies")]))
    await answering(request(b"n", headers=[("kafka_replyTopic", b"replies")], offset=1))
    assert len(replies.sent) == 2 and redis.calls == 0


async def test_a_redis_that_restarted_empty_forgets_nothing() -> None:
    """The reply is recorded in the database too: delivered again after Redis lost
    its copy, the request is not answered twice."""
    durable = FakeDurable()
    answering, engine, replies, _, redis = build(durable=durable)
    await answering(request(b"c-1"))
    assert durable.keys == {request_key("replies", b"c-1")}
    redis.keys.clear()  # Redis restarted without its data
    await answering(request(b"c-1", offset=1))
    assert len(replies.sent) == 1 and len(engine.asked) == 1


async def test_a_request_new_to_the_group_is_not_looked_up_in_the_database() -> None:
    durable = FakeDurable()
    answering, _, replies, _, _ = build(durable=durable, maybe_seen=lambda rec: False)
    await answering(request(b"c-1"))
    await answering(request(b"c-2", offset=1))
    assert len(replies.sent) == 2 and durable.reads == 0


async def test_requests_completing_together_are_recorded_in_one_write() -> None:
    durable = FakeDurable()
    answering, _, replies, _, _ = build(durable=durable)
    await asyncio.gather(*(answering(request(f"c-{i}".encode(), offset=i)) for i in range(20)))
    assert len(replies.sent) == 20
    assert sum(len(w) for w in durable.writes) == 20 and len(durable.writes) < 20


async def test_with_the_database_down_every_request_is_still_answered() -> None:
    durable = FakeDurable()
    durable.down = True
    answering, _, replies, _, redis = build(redis=FakeRedis(), durable=durable)
    redis.down = True
    await answering(request(b"c-1"))
    await answering(request(b"c-1", offset=1))  # nothing knows it: answered again
    assert len(replies.sent) == 2


class Lookup:
    """The reply topic as a lookup sees it: ``sent`` is the answer it gives."""

    def __init__(self, sent: bool | None) -> None:
        self.sent = sent
        self.asked: list[tuple[str, bytes, int]] = []

    async def __call__(self, topic: str, cid: bytes, since_ms: int,
                       partition: int | None) -> bool | None:
        self.asked.append((topic, cid, since_ms))
        return self.sent


def begun(redis: FakeRedis, cid: bytes, at_ms: int) -> None:
    """What a worker killed while answering leaves: the beginning, no answer."""
    redis.keys[f"ms:sending:replies:{cid.hex()}"] = (str(at_ms).encode(), 120)


async def test_a_reply_a_killed_worker_sent_is_found_and_not_sent_again() -> None:
    lookup = Lookup(sent=True)
    answering, engine, replies, _, redis = build(reply_sent=lookup)
    begun(redis, b"c-1", 1_799_999_990_000)
    duplicates = counter("memstream_query_duplicates_total")
    await answering(request(b"c-1"))
    assert lookup.asked == [("replies", b"c-1", 1_799_999_990_000)]
    assert replies.sent == [] and engine.asked == []
    assert counter("memstream_query_duplicates_total") == duplicates + 1
    # recorded now: delivered once more, it is not looked up again
    assert redis.keys == {f"ms:answered:replies:{b'c-1'.hex()}": (b"1", 120)}
    await answering(request(b"c-1", offset=1))
    assert len(lookup.asked) == 1 and replies.sent == []


async def test_a_reply_not_found_or_not_known_is_sent() -> None:
    for found in (False, None):
        lookup = Lookup(sent=found)
        answering, _, replies, _, redis = build(reply_sent=lookup)
        begun(redis, b"c-1", 1_799_999_990_000)
        await answering(request(b"c-1"))
        assert len(lookup.asked) == 1 and len(replies.sent) == 1
        assert list(redis.keys) == [f"ms:answered:replies:{b'c-1'.hex()}"]


async def test_only_a_request_an_earlier_attempt_began_is_looked_up() -> None:
    lookup = Lookup(sent=True)
    answering, _, replies, _, _ = build(reply_sent=lookup)
    await asyncio.gather(*(answering(request(f"c-{i}".encode(), offset=i)) for i in range(5)))
    assert lookup.asked == [] and len(replies.sent) == 5


async def test_the_first_attempt_s_beginning_is_kept() -> None:
    lookup = Lookup(sent=False)
    answering, _, replies, _, redis = build(reply_sent=lookup)
    begun(redis, b"c-1", 1_799_999_990_000)
    replies.fail = True  # this attempt's reply is lost too
    await answering(request(b"c-1"))
    replies.fail = False
    await answering(request(b"c-1", offset=1))
    assert [a[2] for a in lookup.asked] == [1_799_999_990_000] * 2
    assert len(replies.sent) == 1


def slow_replies(answering: QueryAnswering, replies: Replies, *,
                 error: Exception | None = None) -> asyncio.Event:
    """Replies held until the returned gate opens (then delivered, or ``error``)."""
    gate = asyncio.Event()
    deliver = replies.deliver

    async def slow(r: Outgoing) -> bool:
        await gate.wait()
        if error is not None:
            raise error
        return await deliver(r)

    answering.deliver_reply = slow
    return gate


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
    answering, _, replies, _, redis = build()
    task = await cancelled_while_sending(answering, slow_replies(answering, replies), 0.05)
    assert not task.cancelled() and task.result() is None
    assert len(replies.sent) == 1
    assert f"ms:answered:replies:{b'c-1'.hex()}" in redis.keys
    lookup = Lookup(sent=False)
    after, engine, _, _, _ = build(redis=redis, reply_sent=lookup)
    await after(request(b"c-1", offset=1))
    assert engine.asked == [] and lookup.asked == []


async def test_an_expired_or_refused_request_is_neither_claimed_nor_looked_up() -> None:
    lookup = Lookup(sent=True)
    answering, engine, replies, dlq, redis = build(reply_sent=lookup)
    answering.processor.reply_targets = ReplyTargets.of(("replies",), ("chat",), "ms")
    begun(redis, b"gone", 1_799_999_990_000)
    await answering(request(b"gone", age_s=1.5))  # the caller gave up (1 s)
    refused = request(b"bad", headers=request_headers("chat", b"bad"))
    begun_refused = f"ms:sending:chat:{b'bad'.hex()}"
    redis.keys[begun_refused] = (b"1799999990000", 120)
    await answering(refused)
    assert lookup.asked == [] and engine.asked == [] and replies.sent == []
    assert len(dlq.on("dlq")) == 1
    assert redis.calls == 0  # no Redis round trip for either


async def test_a_reply_slower_than_the_grace_lets_the_request_go(monkeypatch: Any) -> None:
    """Past the grace the request ends cancelled (let go uncommitted: the next owner
    answers it or finds its reply); the reply still goes out when the broker takes it."""
    monkeypatch.setattr(answering_module, "SEND_GRACE_S", 0.02)
    answering, _, replies, _, _ = build()
    gate = slow_replies(answering, replies)
    task = await cancelled_while_sending(answering, gate, 0.2)
    assert task.cancelled() and replies.sent == []
    await eventually_sent(replies)


async def test_a_reply_that_fails_or_is_lost_during_the_grace_lets_the_request_go() -> None:
    answering, _, replies, _, _ = build()
    task = await cancelled_while_sending(
        answering, slow_replies(answering, replies, error=OSError("broker gone")), 0.01)
    assert task.cancelled()
    answering, _, replies, _, redis = build()
    replies.fail = True  # the producer gave up on it: not delivered
    task = await cancelled_while_sending(answering, slow_replies(answering, replies), 0.01)
    assert task.cancelled()
    assert not any(k.startswith("ms:answered:") for k in redis.keys)


async def eventually_sent(replies: Replies) -> None:
    for _ in range(100):
        if replies.sent:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the reply never went out")


class SlowRedis(FakeRedis):
    """Each round trip waits for ``gate``: the claim is out until it opens."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    def pipeline(self, transaction: bool = True) -> FakePipeline:
        pipe = super().pipeline(transaction)
        run = pipe.execute

        async def execute() -> list[Any]:
            await self.gate.wait()
            return await run()

        pipe.execute = execute  # type: ignore[method-assign]
        return pipe


class GatedEngine(Engine):
    """Tells when it began; answers when ``done`` opens; stopped, it takes a while to
    unwind (as a search giving back its connection does)."""

    def __init__(self) -> None:
        super().__init__()
        self.began = asyncio.Event()
        self.done = asyncio.Event()
        self.cancelled = False
        self.unwound = False

    async def answer(self, q: MemoryQuery) -> MemoryReply:
        self.began.set()
        try:
            await self.done.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            await asyncio.sleep(0.02)
            self.unwound = True
            raise
        return await super().answer(q)


def replies_ok() -> float:
    return REGISTRY.get_sample_value("memstream_query_replies_total", {"outcome": "ok"}) or 0.0


def gated(redis: SlowRedis, *, new: bool = True,
          ) -> tuple[QueryAnswering, GatedEngine, Replies]:
    """``new``: requests produced after the partition was assigned (the consumer's
    ``maybe_seen`` false)."""
    answering, _, replies, _, _ = build(redis=redis, maybe_seen=lambda rec: not new)
    engine = GatedEngine()
    answering.processor.engine = engine  # type: ignore[assignment]
    return answering, engine, replies


async def test_a_valid_request_is_answered_while_its_claim_is_out() -> None:
    """The claim's round trip is off the caller's wait: the engine begins before it
    returns, and the reply goes out once both are done."""
    redis = SlowRedis()
    answering, engine, replies = gated(redis)
    replied = replies_ok()
    task = asyncio.ensure_future(answering(request(b"c-1")))
    await asyncio.wait_for(engine.began.wait(), 1.0)  # the claim is still out
    assert replies.sent == [] and redis.calls == 0
    engine.done.set()
    await asyncio.sleep(0.01)
    assert replies.sent == []  # answered, the claim not back: nothing is sent yet
    redis.gate.set()
    await asyncio.wait_for(task, 1.0)
    assert len(replies.sent) == 1
    assert replies_ok() == replied + 1


async def test_a_duplicate_s_answer_made_meanwhile_is_neither_sent_nor_counted() -> None:
    redis = SlowRedis()
    redis.keys[f"ms:answered:replies:{b'c-1'.hex()}"] = (b"1", 120)  # answered before
    duplicates = counter("memstream_query_duplicates_total")
    ok = replies_ok()
    for finished in (True, False):  # the engine done before the claim is back, or not
        answering, engine, replies = gated(redis)
        redis.gate.clear()
        task = asyncio.ensure_future(answering(request(b"c-1")))
        await asyncio.wait_for(engine.began.wait(), 1.0)
        if finished:
            engine.done.set()
            await asyncio.sleep(0.01)
        redis.gate.set()
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
    redis = SlowRedis()
    redis.keys[f"ms:answered:replies:{b'c-1'.hex()}"] = (b"1", 120)  # answered before
    answering, engine, replies = gated(redis)
    redis.gate.clear()
    task = asyncio.ensure_future(answering(request(b"c-1")))
    await asyncio.wait_for(engine.began.wait(), 1.0)
    redis.gate.set()
    await ended(task)
    assert engine.cancelled and engine.unwound
    answering, engine, replies = gated(SlowRedis())
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
    redis = SlowRedis()
    answering, engine, replies = gated(redis, new=False)
    task = asyncio.ensure_future(answering(request(b"c-1")))
    await asyncio.sleep(0.05)
    assert not engine.began.is_set()  # the claim is still out
    redis.gate.set()
    await asyncio.wait_for(engine.began.wait(), 1.0)
    engine.done.set()
    await asyncio.wait_for(task, 1.0)
    assert len(replies.sent) == 1
