"""Newer statements first: an update takes the place of what it updates among a cube's
best, and nothing else moves."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.memory.rules.recency import (
    Recency,
    announces_change,
    newer_first,
    states_value,
    value_signature,
)

DAY = 86400.0


@pytest.mark.parametrize(("text", "change"), [
    ("The dashboard API response time has recently improved to 250ms.", True),
    ("We're now using Flask 2.3.1.", True),
    ("I moved the Zoom call to April 22 at 11 AM.", True),
    ("I'm worried about the new April 25 deadline.", True),
    ("the number of mentees has increased to 7", True),
    ("The dashboard API response time is about 400ms.", False),  # a value, no change
    ("I changed my mind about the colour.", False),  # a change, no value
    ("I love hiking.", False),
])
def test_what_announces_a_change(text: str, change: bool) -> None:
    assert announces_change(text) is change


@pytest.mark.parametrize(("a", "b", "same"), [
    ("about 400ms", "around 400 ms", True),
    ("400ms", "250ms", False),
    ("on April 1", "on April 5", False),
    ("3 interviews", "5 interviews", False),
    ("Flask 2.3.1", "Flask 2.3.1 again", True),
])
def test_value_signatures(a: str, b: str, same: bool) -> None:
    assert (value_signature(a) == value_signature(b)) is same
    assert value_signature(a) != 0 and states_value(a)
    assert value_signature("no values here") == 0 and not states_value("no values here")


def rank(scores: list[float], times: list[float], changed: list[bool], values: list[int],
         matched: list[list[bool]], rule: Recency = Recency()) -> list[int]:  # noqa: B008
    """The order of the memories after :func:`newer_first`, best first."""
    out = newer_first(np.array(scores), np.array(times), np.array(changed),
                      np.array(values, dtype=np.int64), np.array(matched),
                      np.ones(len(matched[0])), rule)
    return [int(i) for i in np.argsort(-out, kind="stable")]


BOTH = [True, True, False]  # the query's words each memory holds
FIRST = [True, False, False]
OTHERS = [False, True, True]


@pytest.mark.parametrize(("case", "scores", "times", "changed", "values", "matched", "order"), [
    ("an update announced moves above the original",
     [1.0, 0.8], [0, 20 * DAY], [False, True], [1, 2], [BOTH, BOTH], [1, 0]),
    ("another value, said later, moves above the original",
     [1.0, 0.8], [0, 20 * DAY], [False, False], [1, 2], [BOTH, BOTH], [1, 0]),
    ("the same value said again moves nothing",
     [1.0, 0.8], [0, 20 * DAY], [False, False], [1, 1], [BOTH, BOTH], [0, 1]),
    ("no value at all moves nothing",
     [1.0, 0.8], [0, 20 * DAY], [False, False], [0, 0], [BOTH, BOTH], [0, 1]),
    ("an older statement never moves above a newer one",
     [1.0, 0.8], [20 * DAY, 0], [False, True], [1, 2], [BOTH, BOTH], [0, 1]),
    ("the same breath (under an hour) is no update",
     [1.0, 0.8], [0, 600], [False, True], [1, 2], [BOTH, BOTH], [0, 1]),
    ("an update matching more of the query than the original still updates it",
     [1.0, 0.8], [0, 20 * DAY], [False, True], [1, 2], [FIRST, BOTH], [1, 0]),
    ("an update of another part of the query is about something else",
     [1.0, 0.8], [0, 20 * DAY], [False, True], [1, 2], [FIRST, OTHERS], [0, 1]),
    ("too far below (over the band) stays below",
     [1.0, 0.4], [0, 20 * DAY], [False, True], [1, 2], [BOTH, BOTH], [0, 1]),
    ("a chain: the newest ends first",
     [1.0, 0.9, 0.8], [0, 10 * DAY, 20 * DAY], [False, True, True], [1, 2, 3],
     [BOTH, BOTH, BOTH], [2, 1, 0]),
    ("beyond the depth nothing moves",
     [1.0, 0.95, 0.9], [0, 1, 20 * DAY], [False, False, True], [1, 0, 2],
     [BOTH, BOTH, BOTH], [0, 1, 2]),
    ("an unknown time is neither newer nor older",
     [1.0, 0.8], [0, float("nan")], [False, True], [1, 2], [BOTH, BOTH], [0, 1]),
])
def test_newer_first(case: str, scores: list[float], times: list[float], changed: list[bool],
                     values: list[int], matched: list[list[bool]], order: list[int]) -> None:
    rule = Recency(depth=2) if case.startswith("beyond") else Recency()
    assert rank(scores, times, changed, values, matched, rule) == order, case


@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 100 * DAY), st.booleans(),
                          st.integers(0, 3), st.lists(st.booleans(), min_size=3, max_size=3)),
                min_size=0, max_size=25))
def test_only_the_order_of_the_best_changes_never_the_scores(
        rows: list[tuple[float, float, bool, int, list[bool]]]) -> None:
    if not rows:
        return
    scores = np.array([r[0] for r in rows])
    out = newer_first(scores, np.array([r[1] for r in rows]), np.array([r[2] for r in rows]),
                      np.array([r[3] for r in rows], dtype=np.int64),
                      np.array([r[4] for r in rows]), np.ones(3), Recency(depth=10))
    assert sorted(out.tolist()) == sorted(scores.tolist())  # the same scores, exchanged
    best = set(np.argsort(-scores, kind="stable")[:10].tolist())
    moved = {i for i in range(len(rows)) if out[i] != scores[i]}
    assert moved <= best  # only among the ten best
    floor = 0.5
    cut = newer_first(scores, np.array([r[1] for r in rows]), np.array([r[2] for r in rows]),
                      np.array([r[3] for r in rows], dtype=np.int64),
                      np.array([r[4] for r in rows]), np.ones(3), Recency(depth=10), floor=floor)
    assert {i for i in range(len(rows)) if cut[i] >= floor} == {
        i for i in range(len(rows)) if scores[i] >= floor}  # a cut at the floor keeps its members
