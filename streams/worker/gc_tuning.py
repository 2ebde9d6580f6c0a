"""How often a long-running worker lets Python's garbage collector run.

Python collects its youngest generation every 700 net allocations of container
objects, and the whole heap when enough objects have survived into the oldest
generation. A worker holds some 200,000 long-lived objects (Faust, SQLAlchemy,
aiokafka and pydantic, its agents, the query caches); each full collection
walks them all, 100–270 ms on the benchmark machine during which nothing else
runs, and at the default threshold a busy query worker ran one every few
seconds: its p99 latency was those pauses (``make bench-query``).

``tune_gc`` raises the young-generation threshold tenfold, so that the
short-lived objects of a batch or a query are mostly freed before they are
promoted, and full collections become rare (none in a 30-second benchmark
window at 50 requests/s). Nothing else changes: reference counting frees
what it always freed, and cycles are still collected.

Freezing the objects that exist at start (``gc.freeze``) was tried and is not
done: it makes each full collection cheaper but, with the frozen objects no
longer counted as long-lived, far more frequent; p50 and p99 were both worse.

``time_collections`` times every collection into ``memstream_gc_pause_seconds``
by generation, so that a tail of query latencies can be told apart from the
pauses that make it.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

from streams.metrics import GC_PAUSES

YOUNG_THRESHOLD = 7_000  # Python's default is 700


def tune_gc(young_threshold: int = YOUNG_THRESHOLD) -> tuple[int, int, int]:
    """Raise the young-generation threshold; returns the thresholds now in force."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(max(young_threshold, 1), middle, old)
    return gc.get_threshold()


GcCallback = Callable[[str, dict[str, Any]], None]


def time_collections(clock: Callable[[], float] = time.perf_counter) -> GcCallback:
    """Observe each collection's duration in ``memstream_gc_pause_seconds``; returns the
    callback registered (``gc.callbacks.remove`` undoes it)."""
    by_generation = [GC_PAUSES.labels(str(g)) for g in range(3)]
    started = [0.0]

    def on_collection(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = clock()
        else:
            by_generation[info["generation"]].observe(clock() - started[0])

    gc.callbacks.append(on_collection)
    return on_collection
