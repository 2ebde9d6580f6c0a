"""Whether this process's event loop is busy: the share of the last window it spent
running callbacks, not waiting for I/O.

The query process shares its slots between tenants more strictly while its loop is
busy (:mod:`streams.query.rules.fair_dispatch`): then a request more in flight is
only more steps ahead of every other tenant's on the loop. While it is not
(requests waiting on a remote provider, say), more in flight overlap their waits
and cost the others nothing. The loop's own idle time is the measure, not the
process's CPU time: a process sharing a node's cores with others uses less CPU
than its loop has work for, and its loop is the bottleneck all the same.

:class:`TimedLoop` counts the time its selector waits (a poll that cannot wait,
with ready callbacks queued, is not counted); :func:`install` makes it the loop of
every ``asyncio`` entry point of the process (the worker's Faust app and the query
process install it before their loop is made). :class:`LoopBusy` measures when
asked — by the loop-lag timer every 100 ms, and by the query consumer as it starts
requests: each call at least ``window_s`` after the last measurement measures
again, over the time since (about 0.3 s with the timer's calls); calls in between
get the last answer; a first call measures nothing yet. The share
is the gauge ``memstream_event_loop_busy_share``. A loop that is not timed (an
embedded runtime, a test's, uvloop) is never busy (logged once), and with
``threshold`` 0 no loop is. Time and the loop's busy time are passed in, so the
rule is tested without a loop.
"""

from __future__ import annotations

import asyncio
import logging
import selectors
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import Gauge

from streams.metrics import EVENT_LOOP_BUSY

WINDOW_S = 0.25

log = logging.getLogger(__name__)


class TimedSelector(selectors.DefaultSelector):
    """The platform's selector, counting the seconds spent waiting in ``select``."""

    def __init__(self) -> None:
        super().__init__()
        self.idle_s = 0.0

    def select(self, timeout: float | None = None) -> Any:
        if timeout is not None and timeout <= 0:
            return super().select(timeout)  # a poll: callbacks are waiting to run
        start = time.monotonic()
        try:
            return super().select(timeout)
        finally:
            self.idle_s += time.monotonic() - start


class TimedLoop(asyncio.SelectorEventLoop):
    """An event loop that knows how long it has not been waiting for I/O."""

    def __init__(self) -> None:
        self._timed = TimedSelector()
        self._made = time.monotonic()
        super().__init__(self._timed)

    def busy_s(self) -> float:
        """Seconds since it was made that it spent not waiting in ``select``."""
        return time.monotonic() - self._made - self._timed.idle_s


class TimedLoopPolicy(asyncio.DefaultEventLoopPolicy):
    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        return TimedLoop()


def install() -> None:
    """Every event loop this process makes from now on is a :class:`TimedLoop`."""
    asyncio.set_event_loop_policy(TimedLoopPolicy())


def running_loop_busy_s() -> float | None:
    """The running loop's busy seconds; None when it is not timed."""
    loop = asyncio.get_running_loop()
    return loop.busy_s() if isinstance(loop, TimedLoop) else None


def busy_share(busy_s: float, wall_s: float) -> float:
    """The share of ``wall_s`` spent busy (0 when no time passed; at most 1)."""
    return min(1.0, max(0.0, busy_s) / wall_s) if wall_s > 0 else 0.0


class LoopBusy:
    """``busy()``: the loop was busy at least ``threshold`` of its last window."""

    def __init__(self, threshold: float, *, window_s: float = WINDOW_S,
                 used: Callable[[], float | None] = running_loop_busy_s,
                 clock: Callable[[], float] = time.monotonic,
                 gauge: Gauge | None = EVENT_LOOP_BUSY) -> None:
        if not 0 <= threshold <= 1 or window_s <= 0:
            raise ValueError("a threshold is a share (0 to 1) and a window is positive")
        self.threshold = threshold
        self.window_s = window_s
        self._used = used
        self._clock = clock
        self._gauge = gauge
        self._since: tuple[float, float] | None = None  # (clock, busy time) last measured
        self._untimed = False
        self.share = 0.0

    def __call__(self) -> bool:
        return bool(self.threshold) and self.measure() >= self.threshold

    def measure(self) -> float:
        """The busy share of the last window, measured again when one has passed."""
        now = self._clock()
        if self._since is not None and now - self._since[0] < self.window_s:
            return self.share
        used = self._used()
        if used is None:
            if not self._untimed:
                self._untimed = True
                log.warning("this event loop does not time its waits: its busy share is "
                            "not measured and it never counts as busy")
            return self.share
        if self._since is not None:
            self.share = busy_share(used - self._since[1], now - self._since[0])
            if self._gauge is not None:
                self._gauge.set(self.share)
        self._since = (now, used)
        return self.share
