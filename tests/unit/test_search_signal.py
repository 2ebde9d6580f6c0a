"""A search's signal restricted to the candidates: the entries asked for and the
signal's range, in the signal's order, whatever the order of its ids."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.memory.providers.builtin.search import Signal, member_of


def naive(ids: list[int], values: list[float], keep: set[str]) -> dict[str, float]:
    lo, hi = int(np.argmin(values)), int(np.argmax(values))
    return {str(i): v for n, (i, v) in enumerate(zip(ids, values, strict=True))
            if str(i) in keep or n in (lo, hi)}


@settings(max_examples=400, deadline=None)
@given(st.lists(st.integers(0, 60), unique=True, min_size=1, max_size=40),
       st.data(), st.booleans())
def test_restricted_is_the_kept_entries_and_the_range_in_the_signals_order(
        ids: list[int], data: st.DataObject, ascending: bool) -> None:
    ids = sorted(ids) if ascending else ids
    values = data.draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.5, 7.0]),
                                min_size=len(ids), max_size=len(ids)))
    keep = {str(i) for i in data.draw(st.lists(st.integers(0, 80), max_size=30))}
    got_ids, got_values = Signal(np.array(ids, np.int64), np.array(values)).restricted(
        np.array([int(k) for k in keep], np.int64))
    want = naive(ids, values, keep)
    assert list(zip(map(str, got_ids.tolist()), got_values.tolist(), strict=True)) == list(
        want.items())


def test_an_empty_signal_restricts_to_nothing() -> None:
    ids, values = Signal(np.zeros(0, np.int64), np.zeros(0)).restricted(np.array([1]))
    assert not len(ids) and not len(values)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.integers(0, 200), max_size=60), st.lists(st.integers(0, 200), max_size=60),
       st.sampled_from([1, 7, 10**9]), st.booleans())
def test_member_of_is_isin_for_packed_and_scattered_ids(
        ids: list[int], wanted: list[int], stride: int, ascending: bool) -> None:
    """Ids packed closely go through a table of their span, scattered ones (a stride of
    10**9) through a binary search: both are ``np.isin``."""
    a = np.array(ids, np.int64) * stride
    w = np.unique(np.array(wanted, np.int64) * stride) if ascending else (
        np.array(wanted, np.int64) * stride)
    got = member_of(a, w, ascending=ascending)
    assert got.dtype == np.bool_
    assert got.tolist() == np.isin(a, w).tolist()
