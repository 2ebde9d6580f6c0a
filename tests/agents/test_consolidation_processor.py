"""ConsolidationProcessor and RetryScheduler: what failures turn into, ordering,
acknowledgement, and letting held retries go on a rebalance."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.consolidation.failures import due_at
from streams.consolidation.pipeline import Outcome
from streams.consolidation.retry_scheduler import RetryScheduler
from streams.wire.envelope import SourceRecord
from streams.wire.headers import (
    ATTEMPT,
    NEXT_ATTEMPT_AT,
    header,
)
from streams.wire.records import SessionClosed
from tests.agents.consolidation_harness import Harness


async def test_a_retryable_failure_goes_to_the_retry_topic_then_the_dlq(
    engine: AsyncEngine,
) -> None:
    h = Harness(engine, max_attempts=3)
    await h.say("c1", [("user", "I live in Rome.")])
    h.provider.fail_adds = 100
    rec = h.record(h.closed("c1"), offset=7)
    (first,) = await h.processor.process([rec])
    assert first.outcome == "retried"
    (out,) = h.publisher.on("retry")
    assert out.key == b"c1" and out.value == rec.value
    assert header(out.headers, ATTEMPT) == b"2"
    assert due_at(SourceRecord("retry", 0, 0, out.key, out.value, out.headers)) == pytest.approx(
        h.clock() + 1.0)
    assert header(out.headers, "memstream.retry.reason") == b"provider_unavailable"

    retried = SourceRecord("retry", 2, 40, out.key, out.value, out.headers)
    await h.processor.handle(retried)
    third = h.publisher.on("retry")[-1]
    assert header(third.headers, ATTEMPT) == b"3"
    await h.processor.handle(SourceRecord("retry", 2, 41, third.key, third.value, third.headers))
    (dead,) = h.publisher.on("dlq")
    assert header(dead.headers, "memstream.stage") == b"consolidation"
    assert header(dead.headers, "memstream.error.reason") == b"retries_exhausted"
    assert header(dead.headers, "memstream.source.topic") == b"closed"
    assert header(dead.headers, "memstream.source.offset") == b"7"
    assert [k for k, _ in dead.headers].count(ATTEMPT) == 1
    assert header(dead.headers, NEXT_ATTEMPT_AT) is None
    assert dead.value == rec.value and dead.key == rec.key
    assert h.provider.memories == {}

    # the provider recovers; the dead letter re-driven to its source topic goes through
    h.provider.fail_adds = 0
    replayed = SourceRecord("closed", 0, 99, dead.key, dead.value, [])
    assert (await h.processor.handle(replayed)).outcome == "done"
    assert h.provider.contents("fact") == ["I live in Rome."]


async def test_a_permanent_failure_is_dead_lettered_at_once(engine: AsyncEngine) -> None:
    h = Harness(engine)
    await h.say("c1", [("user", "I live in Rome.")])
    h.provider.fail_adds, h.provider.permanent = 1, True
    (res,) = await h.processor.process([h.record(h.closed("c1"))])
    assert res.outcome == "dead_lettered" and h.publisher.on("retry") == []
    (dead,) = h.publisher.on("dlq")
    assert header(dead.headers, "memstream.error.reason") == b"provider_rejected"
    assert (await h.run_row("t1/c1#1")).last_error.startswith("ProviderRequestRejected")


async def test_undecodable_events_are_dead_lettered(engine: AsyncEngine) -> None:
    h = Harness(engine)
    (res,) = await h.processor.process([SourceRecord("closed", 0, 3, b"k", b"{nope")])
    assert res.outcome == "dead_lettered"
    assert header(h.publisher.on("dlq")[0].headers, "memstream.error.reason") == b"undecodable"


async def test_a_database_outage_is_waited_out_in_place(
        engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness(engine)
    await h.say("c1", [("user", "I live in Rome.")])
    real = h.pipeline.run
    failures = [OperationalError("SELECT 1", {}, Exception("gone away"))] * 3

    async def flaky(closed: SessionClosed) -> Outcome:
        if failures:
            raise failures.pop()
        return await real(closed)

    monkeypatch.setattr(h.pipeline, "run", flaky)
    (res,) = await h.processor.process([h.record(h.closed("c1"))])
    assert res.outcome == "done" and h.publisher.sent == []


async def test_one_conversation_in_order_others_concurrently(
        engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness(engine, consolidation={"tenant_share": 4})  # one tenant, every slot
    order: list[str] = []
    running = 0
    peak = 0

    async def fake_run(closed: SessionClosed) -> Outcome:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        order.append(closed.closed_id)
        running -= 1
        return Outcome("done", "mysql")

    monkeypatch.setattr(h.pipeline, "run", fake_run)
    recs = [h.record(h.closed(c, n)) for n in (1, 2, 3) for c in ("a", "b", "c")]
    await h.processor.process(recs)
    for c in "abc":
        assert [x for x in order if x.startswith(f"t1/{c}#")] == [f"t1/{c}#{n}" for n in (1, 2, 3)]
    assert peak == 3


async def test_the_in_flight_gauge_counts_running_consolidations(
        engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    from streams.metrics import CONSOLIDATIONS_IN_FLIGHT

    h = Harness(engine)
    release, both = asyncio.Event(), asyncio.Event()
    started = 0

    async def blocked_run(closed: SessionClosed) -> Outcome:
        nonlocal started
        started += 1
        if started == 2:
            both.set()
        await release.wait()
        if closed.closed_id == "t1/b#1":
            raise RuntimeError("a failure still leaves the gauge")
        return Outcome("done", "mysql")

    def in_flight() -> float:
        return float(CONSOLIDATIONS_IN_FLIGHT._value.get())

    before = in_flight()
    monkeypatch.setattr(h.pipeline, "run", blocked_run)
    task = asyncio.create_task(h.processor.process([h.record(h.closed(c)) for c in "ab"]))
    await asyncio.wait_for(both.wait(), 5)
    assert in_flight() == before + 2
    release.set()
    await task
    assert in_flight() == before


async def test_the_scheduler_runs_records_when_due_and_acks_after(engine: AsyncEngine) -> None:
    h = Harness(engine)
    await h.say("c1", [("user", "I live in Rome.")])
    await h.say("c2", [("user", "I live in Oslo.")])
    h.provider.fail_adds = 2
    await h.processor.process([h.record(h.closed("c1")), h.record(h.closed("c2"))])
    retries = h.publisher.on("retry")
    assert len(retries) == 2
    acked: list[int] = []
    sched = RetryScheduler(h.processor, clock=h.clock)

    async def let_go() -> None:
        raise AssertionError("nothing is let go without a rebalance")

    for n, r in enumerate(retries):
        async def ack(n: int = n) -> None:
            acked.append(n)
        await sched.admit(SourceRecord("retry", 0, n, r.key, r.value, r.headers), ack, let_go)
    assert await sched.step() == 0 and sched.waiting == 2  # not due yet
    h.clock.advance(1.5)
    assert await sched.step() == 2
    await sched.drain()
    assert sorted(acked) == [0, 1]
    assert sorted(h.provider.contents("fact")) == ["I live in Oslo.", "I live in Rome."]


async def test_held_retries_are_let_go_undone_when_a_rebalance_starts(
        engine: AsyncEngine) -> None:
    h = Harness(engine)
    rebalancing = False
    sched = RetryScheduler(h.processor, clock=h.clock, should_release=lambda: rebalancing)
    done: list[str] = []
    headers = [(ATTEMPT, b"3"), (NEXT_ATTEMPT_AT, b"2099-01-01T00:00:00+00:00")]
    rec = SourceRecord("retry", 1, 5, b"c1", h.record(h.closed("c1")).value, headers)

    async def ack() -> None:
        done.append("ack")

    async def let_go() -> None:
        done.append("let go")

    await sched.admit(rec, ack, let_go)
    assert await sched.step() == 0 and done == []
    rebalancing = True
    await sched.step()
    # handed back undone (its offset stays uncommitted, the next owner reads it
    # again), and nothing copied to the topic
    assert done == ["let go"] and sched.waiting == 0
    assert h.publisher.on("retry") == []


async def test_a_held_retry_stays_one_record_across_rebalances(engine: AsyncEngine) -> None:
    """An outage spanning rebalances: at each one the partition's owner holds what it
    read from the committed offset and lets it go. The committed offset never moves
    past a record let go, so the records are read again — and the topic holds one
    record per retry however many rebalances pass (no copy is added)."""
    h = Harness(engine)
    future = [(ATTEMPT, b"2"), (NEXT_ATTEMPT_AT, b"2099-01-01T00:00:00+00:00")]
    value = h.record(h.closed("c1")).value
    topic = [SourceRecord("retry", 0, n, b"c1", value, future) for n in range(3)]
    committed = 0
    for _ in range(5):  # five rebalances during the outage
        sched = RetryScheduler(h.processor, clock=h.clock, should_release=lambda: True)
        finished: list[int] = []
        for rec in topic[committed:]:
            async def ack(n: int = rec.offset, finished: list[int] = finished) -> None:
                finished.append(n)

            async def let_go() -> None:
                pass

            await sched.admit(rec, ack, let_go)
        assert await sched.step() == 0 and sched.held == 0
        # what may be committed: the offset after the records finished in order
        while committed in finished:
            committed += 1
        copies = h.publisher.on("retry")
        topic += [SourceRecord("retry", 0, len(topic), c.key, c.value, c.headers)
                  for c in copies]
        h.publisher.sent.clear()
    assert committed == 0 and len(topic) == 3


async def test_the_scheduler_loop_runs_in_the_background(engine: AsyncEngine) -> None:
    h = Harness(engine)
    await h.say("c1", [("user", "I live in Rome.")])
    done = asyncio.Event()

    async def ack() -> None:
        done.set()

    sched = RetryScheduler(h.processor, poll_s=0.01)
    async with sched.running():
        await sched.admit(h.record(h.closed("c1"), topic="retry"), ack, ack)
        await asyncio.wait_for(done.wait(), 10)
    assert h.provider.contents("fact") == ["I live in Rome."]


async def test_the_scheduler_holds_a_bounded_number_of_records(engine: AsyncEngine) -> None:
    """Beyond ``max_held`` the agent waits (and so stops taking records from the
    topic) instead of buffering a provider outage's worth of retries."""
    h = Harness(engine)
    sched = RetryScheduler(h.processor, clock=h.clock, max_held=2)
    future = [(ATTEMPT, b"2"), (NEXT_ATTEMPT_AT, b"2099-01-01T00:00:00+00:00")]
    value = h.record(h.closed("c1")).value

    async def ack() -> None:
        pass

    for n in range(2):
        await sched.admit(SourceRecord("retry", 0, n, b"c1", value, future), ack, ack)
    third = asyncio.ensure_future(
        sched.admit(SourceRecord("retry", 0, 2, b"c1", value, future), ack, ack))
    await asyncio.sleep(0.05)
    assert not third.done() and sched.held == 2
    await sched.release()  # a rebalance hands the held ones back: room again
    await asyncio.wait_for(third, 1)
    assert sched.held == 1
