"""The time a coroutine's own steps hold the event loop, its waits left out (a fake
clock that only the steps' "work" advances)."""

from __future__ import annotations

import asyncio

import pytest

from streams.adapters.kafka.loop_time import LoopTime, loop_timed


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_the_steps_are_counted_and_the_waits_are_not() -> None:
    clock, spent, other = Clock(), LoopTime(), asyncio.Event()

    async def request() -> str:
        clock.now += 0.010  # work on the loop
        await asyncio.sleep(0)
        clock.now += 0.020
        await other.wait()  # meanwhile another task works for 5 s
        clock.now += 0.005
        return "reply"

    async def neighbour() -> None:
        await asyncio.sleep(0)
        clock.now += 5.0
        other.set()

    result, _ = await asyncio.gather(loop_timed(request(), spent, clock), neighbour())
    assert result == "reply"
    assert spent.seconds == pytest.approx(0.035)


async def test_an_error_is_raised_and_its_steps_counted() -> None:
    clock, spent = Clock(), LoopTime()

    async def failing() -> None:
        await asyncio.sleep(0)
        clock.now += 0.5
        raise ValueError("bad request")

    with pytest.raises(ValueError, match="bad request"):
        await loop_timed(failing(), spent, clock)
    assert spent.seconds == pytest.approx(0.5)


async def test_a_cancellation_reaches_the_coroutine() -> None:
    clock, spent, cleaned = Clock(), LoopTime(), asyncio.Event()
    started = asyncio.Event()

    async def slow() -> None:
        try:
            started.set()
            await asyncio.sleep(60)
        finally:
            clock.now += 0.25
            cleaned.set()

    task = asyncio.create_task(loop_timed(slow(), spent, clock))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned.is_set() and spent.seconds == pytest.approx(0.25)


async def test_a_clock_that_steps_back_counts_nothing() -> None:
    clock, spent = Clock(), LoopTime()

    async def backwards() -> int:
        clock.now -= 10.0
        return 1

    assert await loop_timed(backwards(), spent, clock) == 1
    assert spent.seconds == 0.0


async def test_real_blocking_work_is_measured() -> None:
    spent = LoopTime()

    async def busy() -> None:
        deadline = asyncio.get_running_loop().time() + 0.02
        while asyncio.get_running_loop().time() < deadline:
            pass
        await asyncio.sleep(0.05)

    loop = asyncio.get_running_loop()
    start = loop.time()
    await loop_timed(busy(), spent)
    wall = loop.time() - start
    assert spent.seconds >= 0.02  # the busy step ...
    assert wall - spent.seconds >= 0.045  # ... and not the sleep
