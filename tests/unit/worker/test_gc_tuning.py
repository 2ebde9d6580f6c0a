"""The worker's garbage-collector thresholds."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from streams.metrics import GC_PAUSES
from streams.worker.gc_tuning import YOUNG_THRESHOLD, time_collections, tune_gc


@pytest.fixture(autouse=True)
def restore_thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


@pytest.mark.parametrize(("asked", "young"), [
    (None, YOUNG_THRESHOLD),
    (20_000, 20_000),
    (0, 1),  # 0 would switch automatic collection off; never done here
])
def test_only_the_young_generation_threshold_is_raised(asked: int | None, young: int) -> None:
    now = tune_gc() if asked is None else tune_gc(asked)
    assert now == (young, 10, 10) == gc.get_threshold()
    assert gc.isenabled()


def test_each_collection_is_timed_by_generation() -> None:
    ticks = iter([10.0, 10.25, 20.0, 20.001])
    pauses = GC_PAUSES.labels("2")
    young = GC_PAUSES.labels("0")
    before = (sample(pauses, "_count"), sample(pauses, "_sum"), sample(young, "_count"))
    gc.disable()  # only the two collections asked for, each with its two ticks
    callback = time_collections(clock=lambda: next(ticks))
    try:
        gc.collect(2)
        gc.collect(0)
    finally:
        gc.callbacks.remove(callback)
        gc.enable()
    assert sample(pauses, "_count") == before[0] + 1
    assert sample(pauses, "_sum") == pytest.approx(before[1] + 0.25)
    assert sample(young, "_count") == before[2] + 1
    gc.collect()
    assert sample(pauses, "_count") == before[0] + 1  # removed: no longer timed


def sample(child: Any, suffix: str) -> float:
    return next(s.value for m in child.collect() for s in m.samples if s.name.endswith(suffix))
