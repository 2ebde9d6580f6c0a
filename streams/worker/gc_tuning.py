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
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 7_000  # Python's default is 700


def tune_gc(young_threshold: int = YOUNG_THRESHOLD) -> tuple[int, int, int]:
    """Raise the young-generation threshold; returns the thresholds now in force."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(max(young_threshold, 1), middle, old)
    return gc.get_threshold()
