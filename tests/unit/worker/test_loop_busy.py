"""Whether the event loop is busy: measured over a window, with clocks passed in, and
a timed loop's own count of the time it does not wait for I/O."""

from __future__ import annotations

import asyncio
import time

import pytest

from streams.worker.loop_busy import (
    LoopBusy,
    TimedLoop,
    busy_share,
    running_loop_busy_s,
)


@pytest.mark.parametrize(("busy_s", "wall_s", "share"), [
    (0.5, 1.0, 0.5),
    (1.0, 1.0, 1.0),
    (1.2, 1.0, 1.0),  # at most all of it
    (0.0, 2.0, 0.0),
    (1.0, 0.0, 0.0),  # no time passed
    (-0.1, 1.0, 0.0),
])
def test_busy_share(busy_s: float, wall_s: float, share: float) -> None:
    assert busy_share(busy_s, wall_s) == pytest.approx(share)


class Clocks:
    def __init__(self) -> None:
        self.now = 100.0
        self.busy = 5.0

    def run(self, wall_s: float, busy_s: float) -> None:
        self.now += wall_s
        self.busy += busy_s


# (seconds passed, of them busy, busy then) after a first call
@pytest.mark.parametrize(("steps", "share"), [
    ([(1.0, 0.9, True)], 0.9),
    ([(1.0, 0.5, False)], 0.5),
    ([(1.0, 0.75, True)], 0.75),  # the threshold itself is busy
    # a call within the window keeps the last answer; the next measures since the last
    ([(1.0, 0.9, True), (0.5, 0.0, True), (0.5, 0.0, False)], 0.0),
    ([(1.0, 0.1, False), (0.3, 0.3, False), (0.7, 0.7, True)], 1.0),
    # a long idle gap measures low, and a busy second after it busy again
    ([(30.0, 0.3, False), (1.0, 1.0, True)], 1.0),
])
def test_busy_over_the_last_window(steps: list[tuple[float, float, bool]],
                                   share: float) -> None:
    clocks = Clocks()
    busy = LoopBusy(0.75, window_s=1.0, used=lambda: clocks.busy, clock=lambda: clocks.now,
                    gauge=None)
    assert busy() is False  # nothing measured yet
    for wall_s, busy_s, expected in steps:
        clocks.run(wall_s, busy_s)
        assert busy() is expected
    assert busy.share == pytest.approx(share)


def test_an_untimed_loop_or_a_threshold_of_zero_is_never_busy(
        caplog: pytest.LogCaptureFixture) -> None:
    clocks = Clocks()
    untimed = LoopBusy(0.5, used=lambda: None, clock=lambda: clocks.now, gauge=None)
    off = LoopBusy(0, used=lambda: clocks.busy, clock=lambda: clocks.now, gauge=None)
    off.measure()
    for _ in range(3):
        clocks.run(1.0, 1.0)
        assert untimed() is False and off() is False
    assert off.measure() == 1.0  # measured all the same (the gauge)
    told = [r for r in caplog.records if "does not time its waits" in r.message]
    assert len(told) == 1  # once


def test_the_gauge_shows_each_share_measured() -> None:
    from prometheus_client import CollectorRegistry, Gauge
    gauge = Gauge("busy_share", "test", registry=CollectorRegistry())
    clocks = Clocks()
    busy = LoopBusy(0.75, used=lambda: clocks.busy, clock=lambda: clocks.now, gauge=gauge)
    busy.measure()
    clocks.run(0.5, 0.2)
    busy.measure()
    assert gauge._value.get() == pytest.approx(0.4)


@pytest.mark.parametrize(("threshold", "window_s"), [(-0.1, 1.0), (1.5, 1.0), (0.5, 0.0)])
def test_nonsense_is_refused(threshold: float, window_s: float) -> None:
    with pytest.raises(ValueError):
        LoopBusy(threshold, window_s=window_s)


def test_a_timed_loop_counts_its_callbacks_not_its_waits() -> None:
    """Over a 0.4 s sleep, a callback spinning 0.2 s is busy time, the rest of the
    sleep is not; an untimed loop tells nothing."""
    def spin() -> None:
        end = time.monotonic() + 0.2
        while time.monotonic() < end:
            pass

    async def measure() -> tuple[float | None, float | None]:
        before = running_loop_busy_s()
        asyncio.get_running_loop().call_later(0.05, spin)
        await asyncio.sleep(0.4)
        return before, running_loop_busy_s()

    with asyncio.Runner(loop_factory=TimedLoop) as runner:
        before, after = runner.run(measure())
    assert before is not None and after is not None
    assert 0.2 <= after - before < 0.3
    assert asyncio.run(measure()) == (None, None)


def test_a_loop_busy_in_small_steps_is_busy_throughout() -> None:
    """Callbacks always ready (polls of the selector that cannot wait): all busy."""
    async def steps() -> tuple[float | None, float | None]:
        before = running_loop_busy_s()
        end = time.monotonic() + 0.2
        while time.monotonic() < end:  # noqa: ASYNC110
            await asyncio.sleep(0)  # a poll of the selector between steps
        return before, running_loop_busy_s()

    with asyncio.Runner(loop_factory=TimedLoop) as runner:
        before, after = runner.run(steps())
    assert before is not None and after is not None
    assert after - before >= 0.19
