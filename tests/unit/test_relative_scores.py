"""Scores relative to the best hit: table-driven."""

from __future__ import annotations

import pytest

from streams.memory.model import StoredMemory
from streams.memory.rules.relative import relative_to_best


def found(*scores: float) -> list[StoredMemory]:
    return [StoredMemory(str(i), f"m{i}", "user_profile", score=s) for i, s in enumerate(scores)]


@pytest.mark.parametrize(("scores", "relativity", "expected"), [
    ((0.4, 0.224, 0.1), 0.45, [1.0, 0.56]),  # Mem0's hybrid scale: an absolute 0.45 kept none
    ((0.5, 0.5, 0.5), 0.45, [1.0, 1.0, 1.0]),  # MemOS' constant score: nothing is dropped
    ((0.9, 0.3), 0.0, [1.0, 0.333333]),
    ((), 0.45, []),
    ((0.0, 0.0), 0.45, [0.0, 0.0]),  # no signal at all: left as it is
])
def test_relative_to_best(scores: tuple[float, ...], relativity: float,
                          expected: list[float]) -> None:
    assert [m.score for m in relative_to_best(found(*scores), relativity)] == expected
