from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.memory.rules.mmr import (
    Scored,
    jaccard,
    jaccard_matrix,
    jaccard_of_words,
    mmr,
    mmr_order,
    similarity_matrix,
    token_set,
    word_ids,
)


def items(*specs: tuple[str, float]) -> list[Scored[str]]:
    return [Scored(text, score, text) for text, score in specs]


def texts(chosen: list[Scored[str]]) -> list[str]:
    return [c.item for c in chosen]


def test_lambda_one_is_plain_relevance_order() -> None:
    got = mmr(items(("a b", 0.5), ("a b c", 0.9), ("d", 0.7)), 3, lambda_=1.0)
    assert texts(got) == ["a b c", "d", "a b"]


def test_a_near_duplicate_falls_behind_a_different_memory() -> None:
    pool = items(
        ("Alice lives in Paris with her cat", 1.0),
        ("Alice lives in Paris with her cat Tom", 0.95),
        ("Bob works at the bakery", 0.8),
    )
    assert texts(mmr(pool, 2, lambda_=0.7)) == [
        "Alice lives in Paris with her cat", "Bob works at the bakery"
    ]
    assert texts(mmr(pool, 2, lambda_=1.0))[1] == "Alice lives in Paris with her cat Tom"


def test_vectors_decide_when_every_item_has_one() -> None:
    pool = [
        Scored("x", 1.0, "same words here", [1.0, 0.0]),
        Scored("y", 0.9, "same words here", [0.0, 1.0]),  # same text, different meaning
        Scored("z", 0.85, "other", [1.0, 0.01]),  # different text, same meaning as x
    ]
    assert texts(mmr(pool, 2, lambda_=0.7)) == ["x", "y"]


def test_custom_similarity_is_used() -> None:
    pool = items(("a", 1.0), ("b", 0.9), ("c", 0.8))
    got = mmr(pool, 2, lambda_=0.5,
              similarity=lambda p, q: 1.0 if {p.item, q.item} == {"a", "b"} else 0.0)
    assert texts(got) == ["a", "c"]


def test_k_bounds_the_result() -> None:
    pool = items(("a", 1.0), ("b", 0.9))
    assert mmr(pool, 0) == []
    assert mmr([], 3) == []
    assert len(mmr(pool, 5)) == 2


def test_jaccard_and_the_similarity_matrix() -> None:
    assert jaccard(token_set("The cat sat"), token_set("the CAT ran")) == pytest.approx(2 / 4)
    m = similarity_matrix(items(("a b", 1.0), ("b c", 1.0), ("", 1.0)))
    assert m[0, 1] == pytest.approx(1 / 3)
    assert m[0, 0] == pytest.approx(1.0)
    assert m[0, 2] == pytest.approx(0.0)


def test_the_jaccard_matrix_is_pairwise_jaccard_in_float32() -> None:
    rng = random.Random(7)
    words = [f"w{i}" for i in range(40)]
    texts = [" ".join(rng.sample(words, rng.randint(0, 9))) for _ in range(60)]
    got = similarity_matrix([Scored(t, 0.5, t) for t in texts])
    sets = [token_set(t) for t in texts]
    expected = np.array([[jaccard(a, b) for b in sets] for a in sets], dtype=np.float32)
    assert got.dtype == np.float32 and np.array_equal(got, expected)  # correctly rounded
    assert np.array_equal(got, got.T)
    with_tokens = similarity_matrix([Scored(t, 0.5, "", tokens=s) for t, s in zip(texts, sets,
                                                                                 strict=True)])
    assert np.array_equal(with_tokens, expected)


def of_words(sets: list[frozenset[str]]) -> np.ndarray:
    """:func:`jaccard_of_words` of the sets laid end to end."""
    ids = [word_ids(s) for s in sets]
    return jaccard_of_words(np.array([w for i in ids for w in i], dtype=np.int64),
                            np.array([len(i) for i in ids], dtype=np.int64))


def test_the_jaccard_of_word_ids_is_the_jaccard_of_words() -> None:
    rng = random.Random(11)
    words = [f"w{i}" for i in range(30)]
    sets = [token_set(" ".join(rng.sample(words, rng.randint(0, 8)))) for _ in range(50)]
    assert of_words(sets).tolist() == jaccard_matrix(sets).tolist()
    assert of_words([frozenset(), frozenset()]).tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert of_words([]).shape == (0, 0) == jaccard_matrix([]).shape
    assert len(word_ids(frozenset(words))) == len(words)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.frozensets(st.sampled_from([f"w{i}" for i in range(12)]) | st.text(max_size=3),
                              max_size=9), max_size=25))
def test_the_jaccard_of_word_ids_is_the_jaccard_of_words_for_any_sets(
        sets: list[frozenset[str]]) -> None:
    """Words shared by many sets, by two, by none; empty sets; no sets."""
    got, expected = of_words(sets), jaccard_matrix(sets)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert got.tolist() == expected.tolist()


def greedy(relevance: list[float], matrix: np.ndarray, k: int, lambda_: float) -> list[int]:
    """MMR as its definition reads: at each step the first item of highest
    ``lambda * relevance - (1 - lambda) * (its largest similarity to a pick)``."""
    order: list[int] = []
    closest = [0.0] * len(relevance)
    for _ in range(min(k, len(relevance))):
        value = [-np.inf if i in order else lambda_ * r - closest[i] * (1.0 - lambda_)
                 for i, r in enumerate(relevance)]
        best = value.index(max(value))
        order.append(best)
        closest = [max(c, float(matrix[best][i])) for i, c in enumerate(closest)]
    return order


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 30), st.data(), st.sampled_from([0.0, 0.3, 0.5, 0.7, 1.0]))
def test_mmr_order_is_the_greedy_definition(
        n: int, data: st.DataObject, lambda_: float) -> None:
    """Ties included: relevances and similarities from a few values, or drawn freely
    (similarities in float32 as the matrices are, cosines may be negative)."""
    few = data.draw(st.booleans())
    rel = data.draw(st.lists(st.sampled_from([0.1, 0.5, 0.9, 1.0]) if few
                             else st.floats(0, 1), min_size=n, max_size=n))
    sims = data.draw(st.lists(st.sampled_from([0.0, 0.25, 1 / 3, 0.5, 1.0]) if few
                              else st.floats(-1, 1, width=32), min_size=n * n, max_size=n * n))
    m = np.array(sims, np.float32).reshape(n, n)
    m = np.maximum(m, m.T)
    k = data.draw(st.integers(0, n + 2))
    assert mmr_order(rel, m, k, lambda_=lambda_) == greedy(rel, m, k, lambda_)


def test_mmr_order_refuses_a_lambda_outside_0_to_1() -> None:
    with pytest.raises(ValueError, match=r"within 0\.\.1"):
        mmr_order([0.5], np.zeros((1, 1), np.float32), 1, lambda_=1.5)
