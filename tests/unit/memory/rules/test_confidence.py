"""A cube's confidence: an absolute floor under scores relative to the cube's best hit."""

from __future__ import annotations

import pytest

from streams.memory.rules.fusion import FusionWeights, Position, Ramp, confidence, fuse
from streams.memory.rules.lexical import holds_specific, matched_share

RAMP = Ramp(dense_lo=0.2, dense_hi=0.4, lexical_lo=0.05, lexical_hi=0.3)


@pytest.mark.parametrize(("dense", "lexical", "expected"), [
    (0.62, 0.0, 1.0),  # a user's cube holding the answer (median best cosine on BEAM)
    (0.40, 0.0, 1.0),
    (0.30, 0.0, 0.5),
    (0.06, 0.0, 0.0),  # one unrelated memory (median cosine on BEAM: 0.06)
    (0.06, 0.125, 0.3),  # ... sharing one common word of an eight-word question
    (0.06, 0.5, 1.0),  # ... or half of its words: a lexical match stands on its own
    (None, 0.0, 0.0),  # lexical only, no word matched
    (None, 1 / 3, 1.0),  # "Book me a flight to Lisbon": one of three words is enough
    (None, 0.1, 0.2),
])
def test_confidence_is_the_better_of_two_absolute_ramps(dense: float | None, lexical: float,
                                                       expected: float) -> None:
    assert confidence(dense, lexical, RAMP) == pytest.approx(expected)


@pytest.mark.parametrize(("held", "share"), [
    ([], 0.0), ([True], 1.0), ([False, False], 0.0), ([True, False, False, True], 0.5)])
def test_matched_share_is_the_share_of_the_querys_words_held(held: list[bool],
                                                             share: float) -> None:
    assert matched_share(held) == share


@pytest.mark.parametrize(("terms", "held", "specific"), [
    ([], [], False),
    (["vegetarian"], [True], True),
    (["time", "need", "make", "way"], [True, False, False, True], False),  # everyday words
    (["plan", "day", "vegetarian", "diet"], [False, False, True, False], True),
    (["我", "的", "我的"], [True, True, True], False),  # the most common Han characters
    (["我", "吃", "吃素"], [False, False, True], True),
])
def test_a_word_that_says_what_is_asked(terms: list[str], held: list[bool],
                                        specific: bool) -> None:
    assert holds_specific(terms, held) is specific


@pytest.mark.parametrize(("dense", "share", "specific", "expected"), [
    (None, 0.1, True, 1.0),  # no embedder: "… mindful of my vegetarian diet" finds the fact
    (None, 0.1, False, 0.2),
    (0.06, 0.1, True, 0.2),  # an embedder says far: one word is not enough
])
def test_without_an_embedder_a_specific_word_is_enough(dense: float | None, share: float,
                                                       specific: bool, expected: float) -> None:
    assert confidence(dense, share, RAMP, specific=specific) == pytest.approx(expected)


def test_a_cubes_only_hit_scores_its_confidence_not_one() -> None:
    lone = fuse({"lesson": 0.1}, {"lesson": 0.06}, {"lesson": Position(None, 0)},
                top_score=confidence(0.06, 0.0, RAMP))
    assert lone == {"lesson": 0.0}
    sure = fuse({"a": 2.0, "b": 1.0}, None, {}, weights=FusionWeights(neighbour=0, session=0),
                top_score=confidence(0.62, 0.5, RAMP))
    assert sure == {"a": 1.0, "b": 0.5}
    half = fuse({"a": 2.0, "b": 1.0}, None, {}, weights=FusionWeights(neighbour=0, session=0),
                top_score=0.5)
    assert half == {"a": 0.5, "b": 0.25}  # relative order and ratios kept, scaled down


@pytest.mark.parametrize(("decay", "scores"), [
    (1.0, {"p0": 1.0, "p1": 0.9, "p2": 0.8, "u": 0.7}),
    (0.5, {"p0": 1.0, "p1": 0.45, "p2": 0.2, "u": 0.7}),
    (0.0, {"p0": 1.0, "p1": 0.0, "p2": 0.0, "u": 0.7}),
])
def test_the_passages_of_one_message_decay_after_the_best(decay: float,
                                                         scores: dict[str, float]) -> None:
    positions = {f"p{i}": Position("s", i + 1, "Assistant", "msg-1") for i in range(3)}
    positions["u"] = Position("s", 0, "User", "msg-0")
    got = fuse({"p0": 1.0, "p1": 0.9, "p2": 0.8, "u": 0.7}, None, positions,
               weights=FusionWeights(neighbour=0, session=0, person=0, passage_decay=decay,
                                     assistant=1.0))
    assert got == pytest.approx(scores)
