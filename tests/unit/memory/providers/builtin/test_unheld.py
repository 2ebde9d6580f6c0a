"""Pure parts of the search of a scope not held (``builtin/unheld.py``) and the ceiling
of :class:`ScopeCache`."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest

from streams.memory.providers.builtin.scope_cache import ScopeCache
from streams.memory.providers.builtin.scope_state import ScopeState
from streams.memory.providers.builtin.unheld import best_of, neighbour_slots
from streams.memory.rules.lexical import bm25_arrays


@pytest.mark.parametrize(("ids", "values", "n", "want"), [
    ([], [], 3, []),
    ([5, 6, 7, 8, 9], [0.1, 0.9, 0.5, 0.7, 0.3], 2, [5, 6, 8]),  # best 2, the lowest
    ([5, 6, 7], [0.2, 0.9, 0.4], 0, [5, 6]),  # only the range
    ([9, 3, 4], [0.5, 0.5, 0.5], 1, [9]),  # ties: the earlier
    ([1, 2, 3], [0.3, 0.2, 0.1], 5, [1, 2, 3]),
])
def test_best_of(ids: list[int], values: list[float], n: int, want: list[int]) -> None:
    got = best_of(np.array(ids, np.int64), np.array(values), n)
    assert got.tolist() == want


def row(session: str | None, seq: int) -> Any:
    return SimpleNamespace(session_key=session, seq=seq)


@pytest.mark.parametrize(("rows", "want"), [
    ([], []),
    ([row(None, 0)], []),
    ([row("a", 3)], [("a", 2), ("a", 4)]),
    ([row("a", 3), row("a", 4)], [("a", 2), ("a", 5)]),  # a place read is not read again
    ([row("a", 0), row("b", 7)], [("a", -1), ("a", 1), ("b", 6), ("b", 8)]),
])
def test_neighbour_slots(rows: list[Any], want: list[tuple[str, int]]) -> None:
    assert neighbour_slots(rows) == want


def test_a_cut_terms_document_frequency_sets_its_weight() -> None:
    """Postings cut to the newest: the given document frequency, not their number,
    gives the term's idf; an uncut term's is its postings' number."""
    cut = (np.array([8, 9], np.int64), np.array([1.0, 1.0]), np.array([4.0, 4.0]))
    whole = (np.array([2], np.int64), np.array([1.0]), np.array([4.0]))
    postings = {"tea": cut, "cello": whole}
    _, plain = bm25_arrays(["tea", "cello"], postings, 100, 4.0)
    ids, weighted = bm25_arrays(["tea", "cello"], postings, 100, 4.0, df={"tea": 60})
    assert ids.tolist() == [8, 9, 2]
    assert weighted[0] < plain[0] and weighted[1] < plain[1]  # a common term weighs less
    assert weighted[2] == plain[2]
    _, full = bm25_arrays(["tea"], {"tea": (np.arange(60, dtype=np.int64), np.ones(60),
                                            np.full(60, 4.0))}, 100, 4.0)
    assert weighted[0] == pytest.approx(full[0])


def stats(sid: int, docs: int) -> Any:
    return SimpleNamespace(id=sid, doc_count=docs)


def test_the_ceiling_defaults_to_the_total_and_never_exceeds_it() -> None:
    assert ScopeCache(cast(Any, None), None, max_rows=100).hold_max == 100
    assert ScopeCache(cast(Any, None), None, max_rows=100, hold_max=500).hold_max == 100
    cache = ScopeCache(cast(Any, None), None, max_rows=100, hold_max=10)
    assert not cache.too_large(stats(1, 10))
    assert cache.too_large(stats(1, 11))


def test_a_held_scope_grown_past_the_ceiling_is_let_go() -> None:
    cache = ScopeCache(cast(Any, None), None, max_rows=100, hold_max=10)
    for sid, n in ((1, 8), (2, 5)):
        st = ScopeState(sid, 1, n, n, 0)
        st.positions = {str(i): (None, 0, None) for i in range(n)}
        cache._install(st, ("t", "c", str(sid)))
    assert cache.held_memories == 13
    assert cache.too_large(stats(1, 11))
    assert not cache.holds(1) and cache.holds(2) and cache.held_memories == 5
