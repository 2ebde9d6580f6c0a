"""The host's stolen CPU time, as the noisy-neighbour test reads it beside latencies."""

from __future__ import annotations

import asyncio

import pytest

from tests.chaos import stolen
from tests.chaos.stolen import StolenTime, stolen_so_far

SPANS = [(1.0, 1.05, 0.1), (2.0, 2.05, 0.2), (2.05, 2.1, 0.1)]


@pytest.mark.parametrize(("begin", "end", "during"), [
    (0.0, 0.9, 0.0),  # before every span
    (0.9, 1.0, 0.0),  # ends where the first begins: no overlap
    (1.02, 1.03, 0.1),  # inside a span: all of it counts
    (1.04, 2.01, 0.3),
    (2.06, 3.0, 0.1),
    (3.0, 4.0, 0.0),
])
def test_what_was_stolen_during_a_span(begin: float, end: float, during: float) -> None:
    assert StolenTime(spans=list(SPANS)).during(begin, end) == pytest.approx(during)


def test_the_total_after_a_phase_began() -> None:
    assert StolenTime(spans=list(SPANS)).total() == pytest.approx(0.4)
    assert StolenTime(spans=list(SPANS)).total(1.5) == pytest.approx(0.3)


def test_the_machine_counts_steal_here() -> None:
    assert stolen_so_far() is not None  # Linux: /proc/stat has the column


async def test_sampling_keeps_the_spans_with_some_stolen(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = iter([5.0, 5.0, 5.3, 5.3, 5.4])
    monkeypatch.setattr(stolen, "stolen_so_far", lambda: next(counts, None))
    sampler = StolenTime(every=0.001)
    await asyncio.wait_for(sampler.run(), 1)  # ends when the count is no longer known
    assert [round(s, 3) for _, _, s in sampler.spans] == [0.3, 0.1]
    assert all(a < b for a, b, _ in sampler.spans)
