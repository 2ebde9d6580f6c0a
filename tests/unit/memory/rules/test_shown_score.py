"""Scores as shown: the array form is the rule, bit for bit, on any float, above all
those whose millionths lie at or near a half (where a product's rounding could
decide)."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.memory.rules.shown_score import shown_score, shown_scores


def bits(values: list[float]) -> list[bytes]:
    return [struct.pack("<d", v) for v in values]


def near_halves(k: int, ulps: int) -> list[float]:
    """Floats a few steps either side of (k + 0.5) millionths."""
    centre = (k + 0.5) / 1e6
    out = [centre]
    lo = hi = centre
    for _ in range(ulps):
        lo, hi = math.nextafter(lo, -1.0), math.nextafter(hi, 2.0)
        out += [lo, hi]
    return out


@pytest.mark.parametrize(("x", "shown"), [
    (0.5, 0.5), (1.0, 1.0), (1.5, 1.0), (math.inf, 1.0), (-0.25, 0.0), (-math.inf, 0.0),
    (math.nan, 0.0), (-0.0, 0.0), (0.0, 0.0), (1e-300, 0.0), (0.1234564999, 0.123456),
    (0.1234565001, 0.123457), (1 / 128, 0.007812),  # 7812.5 millionths exactly: to even
    (0.9999995, 1.0), (0.9999994999, 0.999999),
])
def test_a_score_shows_clamped_to_six_decimals(x: float, shown: float) -> None:
    assert shown_score(x) == shown
    assert bits(shown_scores(np.array([x]))) == bits([shown])


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=50))
def test_the_array_form_is_the_rule_on_any_floats(xs: list[float]) -> None:
    assert bits(shown_scores(np.array(xs, dtype=np.float64))) == bits([shown_score(x) for x in xs])


@given(st.lists(st.floats(0.0, 1.0), max_size=50))
def test_the_array_form_is_the_rule_within_the_range(xs: list[float]) -> None:
    assert bits(shown_scores(np.array(xs, dtype=np.float64))) == bits([shown_score(x) for x in xs])


@given(st.integers(0, 999_999), st.integers(1, 40))
def test_the_array_form_is_the_rule_at_and_near_every_half(k: int, ulps: int) -> None:
    xs = near_halves(k, ulps)
    assert bits(shown_scores(np.array(xs))) == bits([shown_score(x) for x in xs])


def test_exact_halves_are_rounded_to_even_as_round_does() -> None:
    xs = [m / 128 for m in range(129)] + [m / 2**20 for m in range(0, 2**20 + 1, 997)]
    assert bits(shown_scores(np.array(xs))) == bits([shown_score(x) for x in xs])


def test_no_scores_show_as_none() -> None:
    assert shown_scores(np.zeros(0)) == []
