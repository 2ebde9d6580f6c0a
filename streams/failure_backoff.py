"""Skip a failing service for a while: after a failure, calls are not even tried
for ``retry_after_s``, so a dead Redis costs one timeout per interval instead of
one per call."""

from __future__ import annotations

import time
from collections.abc import Callable


class FailureBackoff:
    def __init__(self, retry_after_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.retry_after_s = retry_after_s
        self._clock = clock
        self._down_until = 0.0

    def ready(self) -> bool:
        """False while a recent failure says the service should not be tried."""
        return self._clock() >= self._down_until

    def failed(self) -> None:
        self._down_until = self._clock() + self.retry_after_s
