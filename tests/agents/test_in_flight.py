"""InFlight: runs started as records arrive, one key at a time in order, bounded,
acknowledged only once handled; a failure or a cancellation acknowledges nothing more;
a release lets go of the records whose work has not begun, and only of those."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from streams.worker.in_flight import FlightFailedError, InFlight

Item = tuple[str, int]  # (key, number)


class Runs:
    """Runs that wait for their slot (none given out: every run begins at once), then
    for their gate, logging starts, ends and acknowledgements."""

    def __init__(self, fail: Item | None = None, slots: int | None = None) -> None:
        self.log: list[str] = []
        self.gates: dict[Item, asyncio.Event] = {}
        self.fail = fail
        self.slots = asyncio.Semaphore(slots) if slots is not None else None

    def gate(self, item: Item) -> asyncio.Event:
        return self.gates.setdefault(item, asyncio.Event())

    async def run(self, item: Item, begin: Callable[[], None]) -> None:
        if self.slots is not None:
            await self.slots.acquire()
        try:
            begin()
            self.log.append(f"start {item[0]}{item[1]}")
            await self.gate(item).wait()
            if item == self.fail:
                raise RuntimeError("provider on fire")
            self.log.append(f"end {item[0]}{item[1]}")
        finally:
            if self.slots is not None:
                self.slots.release()

    async def ack(self, item: Item) -> None:
        self.log.append(f"ack {item[0]}{item[1]}")

    def flight(self, limit: int = 8) -> InFlight[Item]:
        return InFlight(self.run, self.ack, key=lambda item: item[0], limit=limit)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_key_runs_one_at_a_time_in_order_while_other_keys_go_on() -> None:
    r = Runs()
    async with r.flight() as f:
        for item in [("a", 1), ("a", 2), ("b", 1), ("a", 3)]:
            await f.add(item)
        await settle()
        assert r.log == ["start a1", "start b1"]
        r.gate(("b", 1)).set()
        r.gate(("a", 3)).set()
        r.gate(("a", 2)).set()
        await settle()
        assert r.log == ["start a1", "start b1", "end b1", "ack b1"]
        r.gate(("a", 1)).set()
    assert r.log == ["start a1", "start b1", "end b1", "ack b1", "end a1", "ack a1",
                     "start a2", "end a2", "ack a2", "start a3", "end a3", "ack a3"]
    assert f.pending == 0


async def test_add_waits_while_the_limit_is_pending() -> None:
    r = Runs()
    async with r.flight(limit=2) as f:
        await f.add(("a", 1))
        await f.add(("a", 2))  # pending too, though it waits for a1
        third = asyncio.create_task(f.add(("b", 1)))
        await settle()
        assert not third.done() and f.pending == 2
        r.gate(("a", 1)).set()
        await asyncio.wait_for(third, 1)
        assert f.pending == 2
        for item in [("a", 2), ("b", 1)]:
            r.gate(item).set()
    assert sorted(x for x in r.log if x.startswith("ack")) == ["ack a1", "ack a2", "ack b1"]


async def test_a_failed_run_stops_the_flight_and_acknowledges_nothing_more() -> None:
    r = Runs(fail=("a", 1))
    with pytest.raises(FlightFailedError):
        async with r.flight() as f:
            for item in [("a", 1), ("a", 2), ("b", 1)]:
                await f.add(item)
            r.gate(("a", 1)).set()
            await settle()
            with pytest.raises(FlightFailedError):
                await f.add(("c", 1))
    assert not [x for x in r.log if x.startswith("ack")]
    assert "start a2" not in r.log and f.pending == 0


async def test_cancelled_runs_are_not_acknowledged() -> None:
    r = Runs()
    r.gate(("b", 1)).set()

    async def consume() -> None:
        async with r.flight() as f:
            await f.add(("a", 1))
            await f.add(("b", 1))
            await asyncio.Event().wait()

    task = asyncio.create_task(consume())
    await settle()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert r.log == ["start a1", "start b1", "end b1", "ack b1"]


async def test_a_release_lets_go_of_the_records_not_begun_and_the_runs_under_way_go_on(
        ) -> None:
    r = Runs(slots=2)
    let_go: list[Item] = []

    async def hand_back(item: Item) -> None:
        let_go.append(item)

    async with r.flight() as f:
        for item in [("a", 1), ("b", 1), ("c", 1), ("a", 2), ("d", 1)]:
            await f.add(item)
        await settle()
        assert r.log == ["start a1", "start b1"]  # the others wait for a slot or a1
        assert await f.release(hand_back) == 3
        assert sorted(let_go) == [("a", 2), ("c", 1), ("d", 1)] and f.pending == 2
        f.resume()  # the rebalance over
        await f.add(("a", 3))  # read again: waits for a1, still under way
        await settle()
        assert "start a3" not in r.log
        for item in [("b", 1), ("a", 1), ("a", 3)]:
            r.gate(item).set()
    assert r.log == ["start a1", "start b1", "end b1", "ack b1", "end a1", "ack a1",
                     "start a3", "end a3", "ack a3"]
    assert await f.release(hand_back) == 0


async def test_a_release_with_every_run_under_way_lets_go_of_nothing() -> None:
    r = Runs()
    async with r.flight() as f:
        await f.add(("a", 1))
        await f.add(("b", 1))
        await settle()

        async def refuse(item: Item) -> None:
            raise AssertionError(f"{item} was under way")

        assert await f.release(refuse) == 0
        r.gate(("a", 1)).set()
        r.gate(("b", 1)).set()
    assert sorted(x for x in r.log if x.startswith("ack")) == ["ack a1", "ack b1"]


async def test_what_is_added_after_a_release_is_let_go_until_resumed() -> None:
    """A record read after one let go must not begin before that one is delivered
    again: until ``resume`` (the rebalance over), it is let go at once — also the one
    the loop was adding, held for room, as the release began."""
    r = Runs()
    let_go: list[Item] = []

    async def hand_back(item: Item) -> None:
        let_go.append(item)

    async with r.flight(limit=2) as f:
        await f.add(("a", 1))
        await f.add(("b", 1))  # no slot limit here: b1 begins too
        adding = asyncio.create_task(f.add(("c", 1)))  # no room
        await settle()
        assert not adding.done()
        assert await f.release(hand_back) == 0  # a1 and b1 under way
        r.gate(("b", 1)).set()
        await asyncio.wait_for(adding, 1)  # room came back: let go, not begun
        await f.add(("a", 2))
        await settle()
        assert let_go == [("c", 1), ("a", 2)] and "start c1" not in r.log
        f.resume()
        await f.add(("a", 3))  # after the rebalance: waits for a1, still under way
        await settle()
        assert "start a3" not in r.log
        r.gate(("a", 1)).set()
        r.gate(("a", 3)).set()
    assert r.log == ["start a1", "start b1", "end b1", "ack b1", "end a1", "ack a1",
                     "start a3", "end a3", "ack a3"]


async def test_one_record_failing_to_be_let_go_leaves_the_others_let_go() -> None:
    r = Runs(slots=1)
    let_go: list[Item] = []

    async def hand_back(item: Item) -> None:
        if item == ("b", 1):
            raise RuntimeError("stream gone")
        let_go.append(item)

    async with r.flight() as f:
        for item in [("a", 1), ("b", 1), ("c", 1), ("d", 1)]:
            await f.add(item)
        await settle()
        assert await f.release(hand_back) == 3
        assert sorted(let_go) == [("c", 1), ("d", 1)]
        r.gate(("a", 1)).set()
