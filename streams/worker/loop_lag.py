"""How long the worker's event loop is held.

Every query, record and heartbeat of a worker runs on one event loop. While a
callback runs without awaiting (a large batch decoded, a cube indexed, a full
garbage collection) or while the process gets no CPU, nothing else moves: a
query's deadline passes with the loop busy elsewhere. A timer asks to be woken
every ``interval_s``; how much later it is woken is the time the loop was held.

:class:`LoopLagWatch` is the pure rule (the times are passed in); the worker
calls :meth:`LoopLagWatch.tick` from that timer, observes each lag in
``memstream_event_loop_lag_seconds`` and logs the line it returns, at most one
every ``log_every_s``, naming the longest hold since the last line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

INTERVAL_S = 0.1
WARN_S = 0.25
LOG_EVERY_S = 5.0


@dataclass
class LoopLagWatch:
    """``tick(now)`` once per wake-up of a timer of ``interval_s``; returns the lag
    of that wake-up (0 for the first) and, when a hold of at least ``warn_s`` is to
    be told, the line to log."""

    interval_s: float = INTERVAL_S
    warn_s: float = WARN_S
    log_every_s: float = LOG_EVERY_S
    _last: float | None = field(default=None, init=False)
    _logged: float | None = field(default=None, init=False)
    _holds: int = field(default=0, init=False)
    _longest: float = field(default=0.0, init=False)

    def tick(self, now: float) -> tuple[float, str | None]:
        last, self._last = self._last, now
        if last is None:
            return 0.0, None
        lag = max(0.0, now - last - self.interval_s)
        if lag >= self.warn_s:
            self._holds += 1
            self._longest = max(self._longest, lag)
        if not self._holds or (self._logged is not None
                               and now - self._logged < self.log_every_s):
            return lag, None
        line = (f"event loop held for {self._longest * 1000:.0f} ms"
                f" ({self._holds} hold{'s' if self._holds > 1 else ''} of at least"
                f" {self.warn_s * 1000:.0f} ms since the last such line)")
        self._logged, self._holds, self._longest = now, 0, 0.0
        return lag, line
