from __future__ import annotations

import pytest

from streams.memory.rules.fusion import (
    FusionWeights,
    Position,
    fuse,
    max_scaled,
    min_max,
    named_people,
    neighbours,
    person_prior,
    session_boost,
    smooth_neighbours,
    speaker_of,
    top_n,
    weighted,
)

P = {
    "a": Position("s1", 0, "Alice"),
    "b": Position("s1", 1, "Bob"),
    "c": Position("s1", 2, "Alice"),
    "d": Position("s2", 0, "Bob"),
    "f": Position(None, 0),
}


def test_min_max_per_query() -> None:
    assert min_max({"a": 2.0, "b": 4.0, "c": 3.0}) == {"a": 0.0, "b": 1.0, "c": 0.5}
    assert min_max({"a": 7.0, "b": 7.0}) == {"a": 1.0, "b": 1.0}
    assert min_max({}) == {}


def test_bm25_keeps_its_proportions_the_weakest_match_is_not_zero() -> None:
    assert max_scaled({"a": 2.0, "b": 4.0, "c": 3.0}) == {"a": 0.5, "b": 1.0, "c": 0.75}
    assert max_scaled({"a": 0.0, "b": 0.0}) == {"a": 0.0, "b": 0.0}
    assert max_scaled({}) == {}
    # two of three matches, standalone facts: the weaker keeps half of the best
    got = fuse({"f": 2.0, "g": 1.0}, None, {"f": Position(None, 0), "g": Position(None, 1)},
               weights=FusionWeights(person=0))
    assert got == {"f": 1.0, "g": 0.5}


def test_weighted_fusion_is_70_30_with_dense_and_lexical_alone_without() -> None:
    got = weighted({"a": 1.0, "b": 0.5}, {"a": 0.0, "c": 1.0})
    assert got == pytest.approx({"a": 0.3, "b": 0.15, "c": 0.7})
    assert weighted({"a": 1.0, "b": 0.5}, None) == {"a": 1.0, "b": 0.5}
    assert weighted({"a": 1.0}, {"a": 1.0}, dense_weight=0.5, lexical_weight=0.5) == {"a": 1.0}


def test_neighbour_smoothing_adds_30_percent_of_the_better_neighbour() -> None:
    got = smooth_neighbours({"a": 0.2, "b": 0.0, "c": 1.0, "d": 0.9, "f": 0.4}, P)
    assert got == pytest.approx({"a": 0.2, "b": 0.3, "c": 1.0, "d": 0.9, "f": 0.4})


def test_neighbours_are_the_adjacent_turns_of_the_same_session() -> None:
    assert neighbours({"b"}, P) == {"a", "c"}
    assert neighbours({"d", "f"}, P) == set()


def test_session_boost_adds_10_percent_of_the_sessions_best() -> None:
    got = session_boost({"a": 0.5, "b": 0.2, "d": 0.3, "f": 0.9}, P)
    assert got == pytest.approx({"a": 0.55, "b": 0.25, "d": 0.33, "f": 0.9})


def test_person_prior_for_the_named_speaker() -> None:
    people = named_people("What did alice paint?", {"Alice", "Bob"})
    assert people == {"alice"}
    got = person_prior({"a": 0.5, "b": 0.5, "f": 0.5}, P, people, weight=0.05)
    assert got == pytest.approx({"a": 0.55, "b": 0.5, "f": 0.5})
    assert named_people("What did Jon Smith say?", {"Jon Smith"}) == {"jon smith"}


def test_fuse_ends_on_0_to_1_with_the_best_at_1() -> None:
    lexical = {"a": 3.0, "b": 1.0, "d": 2.0}
    dense = {"a": 0.1, "b": 0.8, "c": 0.2, "d": 0.4, "f": 0.3}
    got = fuse(lexical, dense, P, query="what did Bob say")
    assert max(got.values()) == pytest.approx(1.0)
    assert all(0.0 <= v <= 1.0 for v in got.values())
    assert max(got, key=lambda k: got[k]) == "b"
    lexical_only = fuse(lexical, None, P)
    assert max(lexical_only, key=lambda k: lexical_only[k]) == "a"
    assert set(lexical_only) == set(lexical)


def test_limit_keeps_the_best_candidates_and_their_neighbours() -> None:
    lexical = {"a": 1.0, "b": 0.9, "c": 0.1, "d": 0.05}
    got = fuse(lexical, None, P, limit=1, weights=FusionWeights(person=0))
    assert set(got) == {"a", "b"}
    assert top_n({"x": 1.0, "y": 3.0, "z": 2.0}, 2) == {"y": 3.0, "z": 2.0}


@pytest.mark.parametrize(
    ("content", "speaker"),
    [("Caroline: I went hiking", "Caroline"), ("Jon Smith: hi", "Jon Smith"),
     ("no speaker here", None), ("10:30 meeting", None)],
)
def test_speaker_of(content: str, speaker: str | None) -> None:
    assert speaker_of(content) == speaker
