"""Faust's wait for the records handed to agents (at a rebalance or a stop) waits and
commits as Faust's does, and never runs a full garbage collection."""

from __future__ import annotations

import asyncio
import gc
import logging
import subprocess
import sys
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from faust.transport.consumer import Consumer

from streams.worker.faust_wait_empty import (
    FAUST_WAIT_EMPTY,
    install_wait_empty,
    let_go_while_waiting,
    wait_empty_loop,
)


@dataclass(eq=False)
class _Message:
    acked: bool = False
    topic: str = "t"
    partition: int = 0
    offset: int = 0


@dataclass
class _Agents:
    dumped: int = 0

    def human_tracebacks(self) -> str:
        self.dumped += 1
        return "stacks"


@dataclass
class _App:
    agents: _Agents = field(default_factory=_Agents)


class _Consumer:
    """What ``wait_empty`` uses of Faust's consumer: each wait for an acknowledgement
    acknowledges the next pending message."""

    def __init__(self, pending: int, *, stop_after: int | None = None) -> None:
        self.app = _App()
        self.diag = SimpleNamespace(set_flag=lambda flag: None, unset_flag=lambda flag: None)
        self.should_stop = False
        self._unacked_messages = {_Message() for _ in range(pending)}
        self.commits: list[int] = []  # messages still pending at each commit
        self.ended = 0
        self.waits = 0
        self._stop_after = stop_after

    async def commit(self) -> None:
        self.commits.append(len(self._unacked_messages))

    async def commit_and_end_transactions(self) -> None:
        self.ended += 1

    async def _wait_for_ack(self, timeout: float) -> None:
        self.waits += 1
        assert timeout == 1.0
        next(m for m in self._unacked_messages if not m.acked).acked = True
        if self._stop_after is not None and self.waits >= self._stop_after:
            self.should_stop = True

    def _clean_unacked_messages(self) -> None:
        self._unacked_messages = {m for m in self._unacked_messages if not m.acked}


@pytest.fixture
def no_collection(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Any garbage collection meanwhile fails the test, however it is started."""
    collected: list[int] = []

    def on_collection(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] == 2:
            collected.append(1)

    monkeypatch.setattr(gc, "collect", lambda *a: collected.append(1) or 0)
    gc.callbacks.append(on_collection)
    try:
        yield
    finally:
        gc.callbacks.remove(on_collection)
    assert not collected, "a full garbage collection while waiting"


@pytest.mark.usefixtures("no_collection")
@pytest.mark.parametrize(("pending", "stop_after", "waits", "left"), [
    (0, None, 0, 0),     # nothing handed out: one last commit
    (1, None, 1, 0),
    (30, None, 30, 0),   # one turn per acknowledgement, a commit on each
    (30, 5, 5, 25),      # the consumer stops: it waits no longer
])
def test_waits_for_every_acknowledgement_and_commits_each_turn(
        pending: int, stop_after: int | None, waits: int, left: int) -> None:
    consumer = _Consumer(pending, stop_after=stop_after)
    asyncio.run(wait_empty_loop()(consumer))
    assert consumer.waits == waits
    assert len(consumer._unacked_messages) == left
    assert consumer.commits == list(range(pending, left, -1))
    assert consumer.ended == 1


@pytest.mark.usefixtures("no_collection")
def test_what_it_waits_for_is_logged_at_most_every_report_interval(
        caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0  # each reading a second later
        return now[0]

    consumer = _Consumer(40)
    with caplog.at_level(logging.INFO, logger="streams.worker.faust_wait_empty"):
        asyncio.run(wait_empty_loop(report_every_s=10.0, clock=clock)(consumer))
    assert 2 <= consumer.app.agents.dumped <= 4
    assert sum("still waiting" in r.message for r in caplog.records) == consumer.app.agents.dumped


@pytest.mark.usefixtures("no_collection")
def test_the_worker_installs_it_on_faust_consumers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Consumer, "wait_empty", Consumer.wait_empty)  # restored afterwards
    install_wait_empty()
    consumer = _Consumer(3)
    asyncio.run(Consumer.wait_empty(consumer))  # type: ignore[arg-type]
    assert not consumer._unacked_messages and consumer.ended == 1


def test_faust_own_wait_collects_garbage_on_every_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the replacement is for: should Faust stop collecting, it can go."""
    collections = []
    monkeypatch.setattr(gc, "collect", lambda *a: collections.append(1) or 0)
    consumer = _Consumer(3)
    consumer.log = SimpleNamespace(  # type: ignore[attr-defined]
        dev=lambda *a: None, warning=lambda *a: None, info=lambda *a: None)
    asyncio.run(FAUST_WAIT_EMPTY(consumer))
    assert len(collections) == 3


def test_a_record_dropped_unacknowledged_in_a_cycle_is_collected_once_nothing_moves() -> None:
    """Faust holds the pending records weakly: one dropped inside a reference cycle
    leaves them only when collected, which the loop does once it stalls."""
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0
        return now[0]

    async def no_ack(timeout: float) -> None:
        await asyncio.sleep(0)

    consumer = _Consumer(0)
    consumer._unacked_messages = weakref.WeakSet()  # type: ignore[assignment]  # as Faust's
    lost = _Message()
    consumer._unacked_messages.add(lost)
    cycle: list[Any] = [lost]
    cycle.append(cycle)
    del lost, cycle
    consumer._wait_for_ack = no_ack  # type: ignore[method-assign]
    consumer._clean_unacked_messages = lambda: None  # type: ignore[method-assign]
    wait = wait_empty_loop(collect_after_s=5.0, clock=clock)(consumer)
    asyncio.run(asyncio.wait_for(wait, 5))
    assert not consumer._unacked_messages and consumer.ended == 1
    assert len(consumer.commits) == 4  # one per turn until the stall reached 5 s


def test_the_worker_installs_it_before_faust_starts() -> None:
    """Importing the worker's context (as every agent does) puts the loop in place."""
    probe = ("import streams.worker.context\n"
             "from faust.transport.consumer import Consumer\n"
             "print(Consumer.wait_empty.__module__)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "streams.worker.faust_wait_empty"


@pytest.mark.usefixtures("no_collection")
def test_the_hooks_let_go_before_each_turn_and_one_failing_stops_nothing(
        caplog: pytest.LogCaptureFixture) -> None:
    consumer = _Consumer(4)
    calls: list[int] = []

    async def let_go_one() -> None:  # an agent letting go of a record not begun
        calls.append(len(consumer._unacked_messages))
        next(iter(consumer._unacked_messages)).acked = True
        consumer._clean_unacked_messages()

    async def broken() -> None:
        raise RuntimeError("agent gone")

    resumed: list[int] = []

    def resume() -> None:
        resumed.append(len(calls))

    def broken_resume() -> None:
        raise RuntimeError("agent gone")

    with let_go_while_waiting(broken, broken_resume), let_go_while_waiting(let_go_one, resume):
        asyncio.run(wait_empty_loop()(consumer))
    assert calls == [4, 2]  # each turn: one let go, one acknowledged
    assert resumed == [2]  # once, when the wait ended
    assert consumer.waits == 2 and not consumer._unacked_messages and consumer.ended == 1
    assert sum("records not begun failed" in r.message for r in caplog.records) == 2
    assert sum("resuming" in r.message for r in caplog.records) == 1
    consumer = _Consumer(1)
    asyncio.run(wait_empty_loop()(consumer))  # outside the block: no hook
    assert calls == [4, 2]
