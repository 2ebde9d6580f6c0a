"""Time the host did not run this machine's CPUs, as the machine counts it.

On a virtual machine whose host caps its CPU time (a quota per period, as a
Firecracker or KVM host may), a machine using more than its share has its
virtual CPUs held back for whole periods: every process on them stalls,
whatever it was doing, and Linux counts that time as *steal* in
``/proc/stat``. :class:`StolenTime` samples that count every ``every``
seconds and keeps the spans in which some was stolen, so a latency can be
read beside the stalls it overlapped. Where ``/proc/stat`` has no steal
column (not Linux), it records nothing.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def stolen_so_far() -> float | None:
    """CPU seconds stolen since boot, summed over the machine's CPUs; None when unknown."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    return int(fields[8]) / _TICKS


@dataclass
class StolenTime:
    """Spans ``(from, to, CPU seconds stolen)`` on the monotonic clock, each with some."""

    every: float = 0.05
    spans: list[tuple[float, float, float]] = field(default_factory=list)

    async def run(self) -> None:
        """Sample until cancelled."""
        last, at = stolen_so_far(), time.monotonic()
        if last is None:
            return
        while True:
            await asyncio.sleep(self.every)
            now, t = stolen_so_far(), time.monotonic()
            if now is None:
                return
            if now > last:
                self.spans.append((at, t, now - last))
            last, at = now, t

    def total(self, begin: float = 0.0) -> float:
        """CPU seconds stolen in the spans that end after ``begin``."""
        return sum(s for _, to, s in self.spans if to > begin)

    def during(self, begin: float, end: float) -> float:
        """CPU seconds stolen in the spans overlapping ``[begin, end]``."""
        return sum(s for a, b, s in self.spans if a < end and b > begin)
