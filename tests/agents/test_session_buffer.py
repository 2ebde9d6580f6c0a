"""SessionStateBuffer: coalesced table writes, and the barrier before acknowledging."""

from __future__ import annotations

from typing import Any

from streams.session.state_buffer import SessionStateBuffer
from streams.testing.session import InMemorySessionTable
from streams.wire.envelope import SourceRecord


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def rec(offset: int, partition: int = 0) -> SourceRecord:
    return SourceRecord("chat", partition, offset, b"k", b"{}")


def state(n: int) -> dict[str, Any]:
    return {"message_count": n}


async def test_reads_see_staged_states_before_they_are_written() -> None:
    table = InMemorySessionTable()
    buf = SessionStateBuffer(table, interval_s=1.0)
    assert buf.get("t/c") is None
    buf.stage("t/c", state(1), rec(0))
    assert buf.get("t/c") == state(1) and table.data == {}


async def test_a_busy_conversation_is_written_once_per_interval() -> None:
    table, clock = InMemorySessionTable(), Clock()
    buf = SessionStateBuffer(table, interval_s=0.5, clock=clock, sleep=clock.sleep)
    for i in range(10):
        buf.stage("t/c", state(i), rec(i))
    await buf.barrier()  # first flush: nothing written recently, no wait
    assert table.writes == 1 and table.data["t/c"] == state(9) and clock.slept == []
    buf.stage("t/c", state(10), rec(10))
    buf.stage("t/d", state(1), rec(11, partition=3))
    await buf.barrier()  # waits out the interval, then writes both
    assert clock.slept == [0.5]
    assert table.writes == 3 and table.data["t/c"] == state(10) and table.data["t/d"] == state(1)
    assert buf.pending == 0


async def test_each_write_runs_in_the_context_of_its_last_record() -> None:
    seen: list[SourceRecord] = []

    class Recording(InMemorySessionTable):
        def set(self, key: str, value: dict[str, Any]) -> None:
            assert self.in_context is not None
            seen.append(self.in_context)
            super().set(key, value)

    buf = SessionStateBuffer(Recording(), interval_s=0.0)
    buf.stage("t/c", state(1), rec(5, partition=2))
    buf.stage("t/c", state(2), rec(6, partition=2))
    await buf.barrier()
    assert [(r.partition, r.offset) for r in seen] == [(2, 6)]


async def test_barrier_with_nothing_staged_returns_at_once() -> None:
    clock = Clock()
    buf = SessionStateBuffer(InMemorySessionTable(), interval_s=5.0, clock=clock, sleep=clock.sleep)
    buf.stage("t/c", state(1), rec(0))
    await buf.barrier()
    await buf.barrier()
    assert clock.slept == []
