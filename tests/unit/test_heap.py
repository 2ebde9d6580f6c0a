"""The worker's garbage-collector thresholds."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from streams.worker.gc_tuning import YOUNG_THRESHOLD, tune_gc


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
