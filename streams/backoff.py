"""Backing off: retrying what must not be given up (the data stays unacknowledged
meanwhile), and skipping a failing service for a while."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from streams.metrics import SINK_FAILURES, SINK_RETRIES

log = logging.getLogger(__name__)
T = TypeVar("T")


async def retry_forever(
    op: Callable[[], Awaitable[T]],
    *,
    what: str,
    initial_s: float,
    max_s: float,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Run ``op`` until it succeeds, backing off exponentially with jitter.

    Used where giving up would lose data: the batch stays unacknowledged
    while this waits, so Kafka keeps it.
    """
    delay = initial_s
    attempt = 0
    while True:
        try:
            return await op()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            attempt += 1
            SINK_FAILURES.labels(what, type(exc).__name__).inc()
            SINK_RETRIES.labels(what).inc()
            log.warning("%s failed (attempt %d), retrying in %.1fs: %s: %s",
                        what, attempt, delay, type(exc).__name__, exc)
            await sleep(delay * (0.5 + random.random() / 2))
            delay = min(max_s, delay * 2)


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
