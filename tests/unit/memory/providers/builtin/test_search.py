"""A search's signal restricted to the candidates: the entries asked for and the
signal's range, in the signal's order, whatever the order of its ids."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.memory.provider import SearchRequest
from streams.memory.providers.builtin.scope_state import ScopeState
from streams.memory.providers.builtin.search import (
    Search,
    Signal,
    _held_postings,
    member_of,
    of_kinds,
    search_terms,
)
from streams.memory.rules.fusion import FusionWeights
from streams.memory.rules.lexical import tokenize


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


def test_a_graph_that_proposes_nothing_held_is_no_dense_signal() -> None:
    """The graph's proposals were all expired meanwhile: the search ranks as it would
    with no vector at all, not on exact cosines of the lexical candidates alone."""
    st = ScopeState(1, 1, 3, 5, 0)
    st._buf = np.zeros((0, 2), np.float32)
    st.add_rows([SimpleNamespace(id=i, session_key=None, seq=0, content=c, type="fact",
                                 kind="fact", doc_len=len(tokenize(c)), role=None,
                                 event_time=None, source_event_ids="[]")
                 for i, c in [(1, "apple pie"), (2, "apple tart"), (3, "pear")]])
    st.add_vectors(["1", "2", "3"], np.array([[1, 0], [0, 1], [0.6, 0.8]], np.float32))

    class Expired:  # proposes only a memory no longer held
        def nearest(self, q: Any, k: int) -> Any:
            return np.array([99], np.int64)

        def farthest(self, q: Any) -> Any:
            return np.array([99], np.int64)

    st.ann = cast(Any, Expired())
    request = SearchRequest(query="apple", cubes=["c"])
    terms = search_terms(request)
    postings, _ = _held_postings([st], terms)
    search = Search(cast(Any, None), cast(Any, None), cast(Any, None), weights=FusionWeights(),
                    candidates=5, mmr_lambda=0.7)
    with_graph = search._scored(request, st, postings, terms, np.array([0, 1], np.float32))
    without = search._scored(request, st, postings, terms, None)
    assert [a.tolist() for a in with_graph] == [a.tolist() for a in without]


def test_a_state_searched_then_changed_scores_as_one_built_anew() -> None:
    """The BM25 parts a search keeps in a state (:class:`KeptParts`) go with any change
    of its postings: grown by a refresh, expired memories dropped."""
    texts = ["apple pie", "apple tart", "pear", "apple pie again", "pie crust", "apple"]
    rows = [SimpleNamespace(id=i, session_key=None, seq=0, content=c, type="fact",
                            kind="fact", doc_len=len(tokenize(c)), role=None,
                                 event_time=None, source_event_ids="[]")
            for i, c in enumerate(texts, start=1)]

    def state(upto: int) -> ScopeState:
        st = ScopeState(1, 1, upto, sum(r.doc_len for r in rows[:upto]), 0)
        st.add_rows(rows[:upto])
        return st

    terms = search_terms(SearchRequest(query="apple pie", cubes=["c"]))

    def lexical(st: ScopeState) -> tuple[list[int], list[float]]:
        got = Search._lexical([st], _held_postings([st], terms)[0], terms)
        return got.ids.tolist(), got.values.tolist()

    st = state(3)
    assert lexical(st) == lexical(state(3)) and len(st.bm25_parts) == 2
    st.add_rows(rows[3:])
    st.doc_count, st.total_len = len(rows), sum(r.doc_len for r in rows)
    assert len(st.bm25_parts) == 0 and lexical(st) == lexical(state(len(rows)))
    st.drop({"2"})
    assert len(st.bm25_parts) == 0
    assert 2 not in lexical(st)[0]


def best_by_definition(ids: list[int], values: list[float], n: int) -> list[int]:
    """The ids of the ``n`` best after min-max normalisation, ties in the signal's order
    (all of them, as they are, when there are no more than ``n``)."""
    if len(ids) <= n:
        return ids
    v = np.array(values, dtype=np.float64)
    lo, hi = float(v.min()), float(v.max())
    norm = (v - lo) / (hi - lo) if hi - lo > 1e-12 else np.ones_like(v)
    order = sorted(range(len(ids)), key=lambda i: -norm[i])  # stable: the signal's order
    return [ids[i] for i in order[:n]]


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 30_000), st.integers(0, 600), st.sampled_from(["spread", "few", "tied"]),
       st.integers(0, 2**32 - 1))
def test_top_is_the_n_best_after_normalisation_ties_in_order(
        size: int, n: int, kind: str, seed: int) -> None:
    """Values all different, from a few levels, or nearly all the same."""
    rng = np.random.default_rng(seed)
    values = (rng.random(size) if kind == "spread" else
              rng.integers(0, 7, size).astype(np.float64) / 3 if kind == "few" else
              np.where(rng.random(size) < 0.001, rng.random(size), 0.5))
    ids = rng.permutation(size * 3)[:size].astype(np.int64)
    got = Signal(ids, values).top(n).tolist()
    assert got == best_by_definition(ids.tolist(), values.tolist(), n)


def kinds_state(scope_id: int, rows: list[tuple[int, str]]) -> ScopeState:
    stt = ScopeState(scope_id, 1, len(rows), 4 * len(rows), 0)
    stt.add_rows([SimpleNamespace(
        id=i, session_key=None, seq=0, content="Tea and cake.", type="text", kind=kind,
        role=None, source_event_ids="[]", event_time=None, doc_len=3) for i, kind in rows])
    return stt


@pytest.mark.parametrize(("kinds", "want"), [
    (("fact",), [True, False, True, False, True]),
    (("episode",), [False, True, False, True, False]),
    (("fact", "episode"), [True] * 5),
    ((), [False] * 5),
])
def test_of_kinds_masks_ids_by_the_kind_each_scope_holds(
        kinds: tuple[str, ...], want: list[bool]) -> None:
    """Two scopes' memories (1 fact, 2 episode; 30 fact, 40 episode) and an id no scope
    holds (99, a fact): the mask of those of ``kinds``."""
    states = [kinds_state(1, [(1, "fact"), (2, "episode")]),
              kinds_state(2, [(30, "fact"), (40, "episode")])]
    ids = np.array([1, 2, 30, 40, 99], np.int64)
    assert of_kinds(states, kinds)(ids).tolist() == want


def test_of_kinds_follows_the_episodes_a_state_gains_and_drops() -> None:
    stt = kinds_state(1, [(1, "fact"), (2, "episode")])
    ids = np.array([1, 2, 3], np.int64)
    facts = of_kinds([stt], ("fact",))
    assert facts(ids).tolist() == [True, False, True]
    stt.add_rows([SimpleNamespace(
        id=3, session_key=None, seq=0, content="More tea.", type="text", kind="episode",
        role=None, source_event_ids="[]", event_time=None, doc_len=2)])
    assert of_kinds([stt], ("fact",))(ids).tolist() == [True, False, False]
    stt.drop({"2"})
    assert of_kinds([stt], ("fact",))(ids).tolist() == [True, True, False]
