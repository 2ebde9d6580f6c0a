"""The background stages wait at their checkpoints for the queries under way then (not
for later ones), ``max_wait_s`` at most; with none under way they go on at once. Under
load, a tenant with most of the background gives way there, for a bounded time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from streams.consolidation.slots import TenantSlots
from streams.metrics import BACKGROUND_WAITED
from streams.quotas.load_share import LoadShare
from streams.worker import foreground
from streams.worker.foreground import Foreground

GUARD_S = 10.0  # a deadlock guard, not a measure


def waited(stage: str) -> float:
    return BACKGROUND_WAITED.labels(stage)._value.get()


async def test_a_checkpoint_with_no_query_under_way_goes_on_at_once() -> None:
    fg = Foreground(max_wait_s=GUARD_S)
    before = waited("idle-test")
    await asyncio.wait_for(fg.turn("idle-test"), GUARD_S / 2)
    assert fg.serving == 0 and waited("idle-test") == before


async def test_a_checkpoint_waits_for_the_queries_under_way() -> None:
    fg = Foreground(max_wait_s=GUARD_S, share=GUARD_S)
    done = asyncio.Event()

    async def query(_: int) -> None:
        await done.wait()

    served = asyncio.ensure_future(fg.serve(query)(1))
    second = asyncio.ensure_future(fg.serve(query)(2))
    await asyncio.sleep(0)
    assert fg.serving == 2
    turn = asyncio.ensure_future(fg.turn("busy-test"))
    await asyncio.sleep(0.01)
    assert not turn.done()  # both queries under way
    done.set()
    await asyncio.wait_for(asyncio.gather(served, second, turn), GUARD_S)
    assert fg.serving == 0 and waited("busy-test") > 0


async def test_a_checkpoint_waits_at_most_max_wait_s() -> None:
    fg = Foreground(max_wait_s=0.01)
    never = asyncio.Event()

    async def hanging(_: int) -> None:
        await never.wait()

    stuck = asyncio.ensure_future(fg.serve(hanging)(1))
    await asyncio.sleep(0)
    for _ in range(3):  # slowed, never stopped
        await asyncio.wait_for(fg.turn("stuck-test"), GUARD_S)
    assert fg.serving == 1
    stuck.cancel()
    await asyncio.gather(stuck, return_exceptions=True)
    assert fg.serving == 0  # a query cancelled is no longer under way


async def test_no_wait_when_turned_off() -> None:
    fg = Foreground(max_wait_s=0)
    never = asyncio.Event()

    async def hanging(_: int) -> None:
        await never.wait()

    stuck = asyncio.ensure_future(fg.serve(hanging)(1))
    await asyncio.sleep(0)
    before = waited("off-test")
    await asyncio.wait_for(fg.turn("off-test"), GUARD_S)
    assert waited("off-test") == before
    stuck.cancel()
    await asyncio.gather(stuck, return_exceptions=True)


async def test_a_checkpoint_does_not_wait_for_queries_that_come_later() -> None:
    fg = Foreground(max_wait_s=GUARD_S, share=GUARD_S)  # only the first query ends the wait
    first_done, later_done = asyncio.Event(), asyncio.Event()

    async def first(_: int) -> None:
        await first_done.wait()

    async def later(_: int) -> None:
        await later_done.wait()

    a = asyncio.ensure_future(fg.serve(first)(1))
    await asyncio.sleep(0)
    turn = asyncio.ensure_future(fg.turn("flood-test"))
    await asyncio.sleep(0)
    b = asyncio.ensure_future(fg.serve(later)(2))  # a flood goes on
    await asyncio.sleep(0.01)
    assert not turn.done() and fg.serving == 2
    first_done.set()
    for _ in range(100):  # a few turns of the loop, no timeout to end the wait
        if turn.done():
            break
        await asyncio.sleep(0)
    assert turn.done() and fg.serving == 1  # back while the later query is under way
    later_done.set()
    await asyncio.wait_for(asyncio.gather(a, b), GUARD_S)


async def test_one_stage_waits_at_most_its_share_of_each_window() -> None:
    now = [0.0]
    fg = Foreground(max_wait_s=0.1, share=0.25, clock=lambda: now[0])
    never = asyncio.Event()

    async def hanging(_: int) -> None:
        await never.wait()

    stuck = asyncio.ensure_future(fg.serve(hanging)(1))
    await asyncio.sleep(0)
    waits = [asyncio.ensure_future(fg.turn("share-test")) for _ in range(5)]
    await asyncio.sleep(0)
    # the share is 0.25 s of a 1 s window: two waits of 0.1 s and one of 0.05 s; the
    # rest go on at once, though a query is still under way
    assert sum(w.done() for w in waits) == 2
    now[0] = 0.5  # the waits took their whole allowance (half a second has passed)
    await asyncio.wait_for(asyncio.gather(*waits), GUARD_S)
    assert fg._windows["share-test"] == [0.0, 0.25]
    late = asyncio.ensure_future(fg.turn("share-test"))
    await asyncio.sleep(0)
    assert late.done()  # the share of this window is spent
    now[0] = 1.0  # the next window: waits again
    again = asyncio.ensure_future(fg.turn("share-test"))
    await asyncio.sleep(0)
    assert not again.done()
    await asyncio.wait_for(again, GUARD_S)
    stuck.cancel()
    await asyncio.gather(stuck, return_exceptions=True)


def loud_and_calm(lag_s: float = 0.05) -> LoadShare:
    load = LoadShare(lag_s)
    for second in range(5):
        load.background.add("calm", float(second), 10)
    load.background.add("loud", 4.0, 2000)
    return load


async def test_under_load_the_tenant_with_most_of_the_background_gives_way(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(foreground, "YIELD_STEP_S", 0.0)  # the time is the clock's below
    now = [5.0]

    def clock() -> float:
        now[0] += 0.05  # each look at the clock: the time of one step of giving way
        return now[0]

    load = loud_and_calm()
    fg = Foreground(max_wait_s=0.1, clock=clock, load=load)
    await fg.turn("give-way", "loud")  # the worker keeps up: back at once
    assert now[0] == pytest.approx(5.05)
    load.note_lag(0.2, now[0])  # loaded until 6.05
    await fg.turn("give-way", "calm", 10)  # calm's work is not held up
    assert now[0] == pytest.approx(5.1)
    await fg.turn("give-way", "loud")
    assert now[0] == pytest.approx(5.1 + 21 * 0.05)  # YIELD_MAX_S at most (and the count)
    await fg.turn("give-way", "loud")  # the load is over (no lag since): back at once
    assert now[0] == pytest.approx(6.2)


async def test_the_size_of_a_run_counts_in_its_tenant_share() -> None:
    load = LoadShare(0.05)
    fg = Foreground(max_wait_s=0.1, load=load)
    for _ in range(3):
        await fg.turn("give-way", "calm", 10)
    await fg.turn("give-way", "loud", 2000)
    load.note_lag(1.0, time.monotonic())
    assert load.yields("loud", time.monotonic()) and not load.yields("calm", time.monotonic())


async def test_the_background_does_not_wait_for_a_heavy_tenants_queries() -> None:
    load = LoadShare(0.05)
    now = time.monotonic()
    for i in range(40):
        load.answered("loud", now - i * 0.01)
    for i in range(4):
        load.answered("calm", now - i * 0.1)
    fg = Foreground(max_wait_s=GUARD_S, share=GUARD_S, load=load)
    release = asyncio.Event()
    on_time = asyncio.ensure_future(fg.serve(hanging_until(release), tenant=lambda t: t)("loud"))
    await asyncio.sleep(0)
    assert fg.serving == 1  # the worker keeps up: loud's query is waited for like any
    load.note_lag(1.0, time.monotonic())

    hanging = hanging_until(release)
    loud = asyncio.ensure_future(fg.serve(hanging, tenant=lambda t: t)("loud"))
    await asyncio.sleep(0)
    assert fg.serving == 1  # loaded: loud's query is not one the background waits for
    calm = asyncio.ensure_future(fg.serve(hanging, tenant=lambda t: t)("calm"))
    await asyncio.sleep(0)
    assert fg.serving == 2
    release.set()
    await asyncio.wait_for(asyncio.gather(on_time, loud, calm), GUARD_S)


def hanging_until(release: asyncio.Event) -> Callable[[str], Awaitable[None]]:
    async def hanging(tenant: str) -> None:
        await release.wait()
    return hanging


def loud_giving_way() -> Foreground:
    """A worker loaded for a second now, where loud has most of the background."""
    load, now = LoadShare(0.05), time.monotonic()
    load.background.add("calm", now, 10)
    load.background.add("loud", now, 2000)
    load.note_lag(1.0, now)
    return Foreground(max_wait_s=0.1, load=load)


async def loud_run(fg: Foreground, slots: TenantSlots, stage: str) -> None:
    """A run of loud's in one of ``slots``, at a checkpoint where it gives way."""
    async with slots.hold("loud"):
        await fg.turn(stage, "loud")


async def test_a_run_giving_way_leaves_its_slot_to_another(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(foreground, "YIELD_STEP_S", 0.001)
    monkeypatch.setattr(foreground, "YIELD_MAX_S", 0.1)
    fg = loud_giving_way()
    slots = TenantSlots(1)
    began = asyncio.Event()

    async def calm_run() -> None:
        async with slots.hold("calm"):
            began.set()

    loud = asyncio.ensure_future(loud_run(fg, slots, "give-way-slot"))
    await asyncio.sleep(0.01)
    calm = asyncio.ensure_future(calm_run())
    await asyncio.wait_for(began.wait(), GUARD_S)  # calm's run took the one slot
    assert not loud.done()  # while loud's gave way
    await asyncio.wait_for(asyncio.gather(loud, calm), GUARD_S)


async def test_a_run_cancelled_while_giving_way_ends_without_waiting_for_a_slot(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(foreground, "YIELD_STEP_S", 0.001)
    fg = loud_giving_way()
    slots = TenantSlots(1)
    calm_holds, calm_done = asyncio.Event(), asyncio.Event()

    async def calm_run() -> None:
        async with slots.hold("calm"):
            calm_holds.set()
            await calm_done.wait()

    loud = asyncio.ensure_future(loud_run(fg, slots, "give-way-cancel"))
    await asyncio.sleep(0.01)
    calm = asyncio.ensure_future(calm_run())
    await asyncio.wait_for(calm_holds.wait(), GUARD_S)
    loud.cancel()
    await asyncio.wait([loud], timeout=GUARD_S)
    assert loud.cancelled()  # at once, though calm's run holds the one slot
    calm_done.set()
    await asyncio.wait_for(calm, GUARD_S)
    async with asyncio.timeout(GUARD_S), slots.hold("next"):
        pass  # and no slot was lost
