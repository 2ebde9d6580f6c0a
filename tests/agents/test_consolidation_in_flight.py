"""The consolidation agent's reading: each session end started as it arrives and
acknowledged once handled (``InFlight`` over the processor and the commit guard,
as ``agents/consolidate.py`` puts them together)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.consolidation.pipeline import Outcome
from streams.consolidation.slots import TenantSlots
from streams.wire.envelope import SourceRecord
from streams.wire.records import SessionClosed
from streams.worker.commit_guard import CommitGuard
from streams.worker.faust_glue import finish, source_record
from streams.worker.in_flight import InFlight
from tests.agents.consolidation_harness import Harness
from tests.support.worker import eventually

TP = ("closed", 0)


def event(rec: SourceRecord) -> Any:
    """A Faust event carrying ``rec`` (what the agent's stream yields)."""
    return SimpleNamespace(message=SimpleNamespace(
        topic=rec.topic, partition=rec.partition, offset=rec.offset, key=rec.key,
        value=rec.value, headers=[], timestamp=0.0))


class Agent:
    """What the agent does with each event: the processor's ``handle``, then the
    commit guard's ``finish`` and the acknowledgement."""

    def __init__(self, h: Harness, offsets: list[int],
                 seen: Callable[[], object] = lambda: None) -> None:
        self.guard = CommitGuard()
        self.guard.received(TP, offsets)
        self.acked: list[int] = []
        self.seen: list[object] = []  # ``seen()`` at each acknowledgement
        self._seen = seen
        self.flight: InFlight[Any] = InFlight(
            lambda e, begin: h.processor.handle(source_record(e), on_begin=begin), self.ack,
            key=lambda e: e.message.key, limit=8)

    async def ack(self, e: Any) -> None:
        self.seen.append(self._seen())
        finish(self.guard, e)
        self.acked.append(e.message.offset)


def hold(h: Harness, monkeypatch: pytest.MonkeyPatch, held: str,
         ran: list[str]) -> asyncio.Event:
    """Runs of ``held`` (a closed_id) wait for the event returned; ``ran`` gets each
    closed_id as its run starts and again as it ends."""
    release = asyncio.Event()
    run = h.pipeline.run

    async def held_run(closed: SessionClosed) -> Outcome:
        ran.append(f"start {closed.closed_id}")
        if closed.closed_id == held:
            await release.wait()
        outcome = await run(closed)
        ran.append(f"end {closed.closed_id}")
        return outcome

    monkeypatch.setattr(h.pipeline, "run", held_run)
    return release


async def test_a_short_session_read_after_a_long_one_is_not_held_behind_it(
        engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness(engine)
    await h.say("long", [("user", "I live in Rome.")], tenant="loud")
    await h.say("short", [("user", "I work at Acme.")], tenant="calm")
    ran: list[str] = []
    release = hold(h, monkeypatch, "loud/long#1", ran)
    agent = Agent(h, [0, 1])
    async with agent.flight:
        await agent.flight.add(event(h.record(h.closed("long", tenant="loud"), offset=0)))
        # read while the long one runs
        await asyncio.wait_for(agent.flight.add(
            event(h.record(h.closed("short", tenant="calm"), offset=1))), 5)
        await eventually(lambda: agent.acked == [1], 5, "the short session acknowledged")
        assert "end loud/long#1" not in ran  # the long one still runs
        assert h.provider.contents("fact") == ["I work at Acme."]
        # its acknowledgement never lets the commit pass the long one, unfinished
        assert agent.guard.safe(TP) == 0
        release.set()
    assert agent.acked == [1, 0] and agent.guard.safe(TP) == 2
    assert sorted(h.provider.contents("fact")) == ["I live in Rome.", "I work at Acme."]


async def test_a_conversations_session_ends_run_one_at_a_time_in_order(
        engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness(engine)
    await h.say("c1", [("user", "I live in Rome.")], seq=1)
    await h.say("c1", [("user", "I live in Oslo now.")], seq=2)
    ran: list[str] = []
    release = hold(h, monkeypatch, "t1/c1#1", ran)
    agent = Agent(h, [0, 1])
    async with agent.flight:
        await agent.flight.add(event(h.record(h.closed("c1", 1), offset=0)))
        await agent.flight.add(event(h.record(h.closed("c1", 2), offset=1)))
        await asyncio.sleep(0.2)
        assert ran == ["start t1/c1#1"] and agent.acked == []
        release.set()
    assert ran == ["start t1/c1#1", "end t1/c1#1", "start t1/c1#2", "end t1/c1#2"]
    assert agent.acked == [0, 1] and agent.guard.safe(TP) == 2


async def test_a_session_end_sent_to_retry_is_acknowledged_after_the_record_is_sent(
        engine: AsyncEngine) -> None:
    h = Harness(engine)
    await h.say("c1", [("user", "I live in Rome.")])
    h.provider.fail_adds = 100
    agent = Agent(h, [0], seen=lambda: len(h.publisher.on("retry")))
    async with agent.flight:
        await agent.flight.add(event(h.record(h.closed("c1"), offset=0)))
    assert agent.seen == [1] and agent.acked == [0] and agent.guard.safe(TP) == 1


async def test_a_stopped_worker_leaves_what_was_not_handled_unacknowledged(
        engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness(engine)
    await h.say("a", [("user", "I live in Rome.")])
    await h.say("b", [("user", "I work at Acme.")])
    ran: list[str] = []
    hold(h, monkeypatch, "t1/a#1", ran)
    agent = Agent(h, [0, 1])

    async def consume() -> None:
        async with agent.flight:
            await agent.flight.add(event(h.record(h.closed("a"), offset=0)))
            await agent.flight.add(event(h.record(h.closed("b"), offset=1)))
            await asyncio.Event().wait()  # reading on: nothing more arrives

    task = asyncio.create_task(consume())
    await eventually(lambda: agent.acked == [1], 5, "b acknowledged")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert agent.acked == [1] and agent.flight.pending == 0
    assert agent.guard.safe(TP) == 0  # a is delivered again from the commit


async def test_a_rebalance_lets_go_of_the_session_ends_waiting_for_a_slot(
        engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``agents/consolidate.py`` does while Faust waits at a rebalance: the
    session ends waiting for a slot are let go unacknowledged, having done nothing
    (no run, no memory), the commit held below them; the run under way goes on."""
    h = Harness(engine)
    h.processor.slots = TenantSlots(1)
    for c in ("a", "b", "c"):
        await h.say(c, [("user", f"I live in city {c}.")])
    ran: list[str] = []
    release = hold(h, monkeypatch, "t1/a#1", ran)
    agent = Agent(h, [0, 1, 2])
    let_go: list[int] = []

    async def hand_back(e: Any) -> None:
        let_go.append(e.message.offset)

    async with agent.flight:
        for offset, c in enumerate(("a", "b", "c")):
            await agent.flight.add(event(h.record(h.closed(c), offset=offset)))
        await eventually(lambda: ran == ["start t1/a#1"], 5, "a under way")
        assert await agent.flight.release(hand_back) == 2
        assert sorted(let_go) == [1, 2] and agent.flight.pending == 1
        release.set()
    assert ran == ["start t1/a#1", "end t1/a#1"] and agent.acked == [0]
    assert h.provider.contents("fact") == ["I live in city a."]
    assert agent.guard.safe(TP) == 1  # b and c are delivered again from the commit
