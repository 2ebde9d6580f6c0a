"""Backing off: one policy for every growing wait between attempts
(:class:`Backoff`; the fixed pauses of a polling loop are not backoff),
retrying what must not be given up (the data stays unacknowledged meanwhile),
and skipping a failing service for a while."""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Literal, TypeVar

from streams.metrics import SINK_FAILURES, SINK_RETRIES

log = logging.getLogger(__name__)
T = TypeVar("T")

Jitter = Literal["none", "half"]
"""``none``: wait the base delay; ``half``: a uniform draw from its upper half,
``base * (0.5 + r / 2)`` for ``r`` in [0, 1)."""


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff: how long to wait after the ``attempt``-th failure.

    Attempts count from 1 (a lower number counts as 1). The base delay after
    attempt ``n`` is ``min(max_s, initial_s * factor ** (n - 1))``; with
    ``cap_first=False`` the first one is ``initial_s`` as given, even above
    ``max_s`` (the cap bounds the growth only). A growth beyond the float range
    is the cap, so a policy can be asked about any attempt. The policy itself
    is pure: randomness is passed to :meth:`delay`.
    """

    initial_s: float
    max_s: float = math.inf
    factor: float = 2.0
    jitter: Jitter = "none"
    cap_first: bool = True

    def base(self, attempt: int) -> float:
        """The delay after ``attempt`` before jitter."""
        n = max(1, attempt)
        if n == 1 and not self.cap_first:
            return self.initial_s
        try:
            grown = self.initial_s * self.factor ** (n - 1)
        except OverflowError:
            grown = math.inf
        return min(self.max_s, grown)

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """The wait after ``attempt``; ``rand`` (uniform in [0, 1)) is called once
        when the policy jitters, never otherwise."""
        base = self.base(attempt)
        if self.jitter == "half":
            return base * (0.5 + rand() / 2)
        return base

    def delays(self, rand: Callable[[], float] = random.random) -> Iterator[float]:
        """The waits after attempts 1, 2, 3, … without end."""
        return (self.delay(n, rand) for n in itertools.count(1))


def forever(initial_s: float, max_s: float) -> Backoff:
    """The waits of :func:`retry_forever`, for loops that wait out an outage the
    same way: ``initial_s`` doubling up to ``max_s``, upper-half jitter, the
    first wait ``initial_s`` as given."""
    return Backoff(initial_s, max_s, jitter="half", cap_first=False)


async def retry_forever(
    op: Callable[[], Awaitable[T]],
    *,
    what: str,
    initial_s: float,
    max_s: float,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rand: Callable[[], float] = random.random,
    give_up: Callable[[Exception], bool] = lambda exc: False,
) -> T:
    """Run ``op`` until it succeeds, backing off exponentially with jitter
    (:func:`forever`); an error ``give_up`` says no attempt can heal is raised.

    Used where giving up would lose data: the batch stays unacknowledged
    while this waits, so Kafka keeps it.
    """
    backoff = forever(initial_s, max_s)
    attempt = 0
    while True:
        try:
            return await op()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if give_up(exc):
                raise
            attempt += 1
            SINK_FAILURES.labels(what, type(exc).__name__).inc()
            SINK_RETRIES.labels(what).inc()
            log.warning("%s failed (attempt %d), retrying in %.1fs: %s: %s",
                        what, attempt, backoff.base(attempt), type(exc).__name__, exc)
            await sleep(backoff.delay(attempt, rand))


class FailureBackoff:
    """Skip a failing service for a while: after a failure, calls are not even tried
    for ``retry_after_s``, so a dead Redis costs one timeout per interval instead of
    one per call."""

    def __init__(self, retry_after_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.retry_after_s = retry_after_s
        self._clock = clock
        self._down_until = 0.0

    def ready(self) -> bool:
        """False while a recent failure says the service should not be tried."""
        return self._clock() >= self._down_until

    def failed(self) -> None:
        self._down_until = self._clock() + self.retry_after_s
