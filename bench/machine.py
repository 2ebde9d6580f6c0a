"""The machine a benchmark runs on: how much of its CPU went to other guests.

On a virtual machine the hypervisor may run other guests on the cores this one
believes it has (``steal`` in ``/proc/stat``, ``st`` in ``vmstat``). Latency
figures taken while a few per cent or more of the CPU is stolen are the host's,
not the build's: the benchmarks print the share beside their figures.
"""

from __future__ import annotations

from pathlib import Path


def machine_ticks() -> tuple[int, int]:
    """The machine's CPU time so far, all of it and the part its hypervisor gave to
    others (``steal``), in clock ticks, from ``/proc/stat``."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields[:8]), fields[7] if len(fields) > 7 else 0


def steal_pct(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The share of the machine's CPU time between two :func:`machine_ticks` that went
    to other guests: above a few per cent, latency figures of that run are the host's."""
    total = after[0] - before[0]
    return round(100 * (after[1] - before[1]) / total, 1) if total > 0 else 0.0
