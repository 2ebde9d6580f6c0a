"""Maximal marginal relevance: pick relevant items that do not repeat each other.

Each step takes the item maximising
``lambda_ * relevance - (1 - lambda_) * max similarity to the items already taken``.
Similarity is the cosine of the items' vectors when every item has one, and
otherwise the Jaccard overlap of their token sets, so the same function works
with and without an embedder.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

T = TypeVar("T")

_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Scored(Generic[T]):
    """An item to rank: its payload, relevance, text, and optionally a vector."""

    item: T
    score: float
    text: str = ""
    vector: Sequence[float] | None = None
    tokens: frozenset[str] | None = None  # ``token_set(text)``, when the caller has it


Similarity = Callable[[Scored[T], Scored[T]], float]
Similarities = npt.NDArray[np.float32] | npt.NDArray[np.float64]
"""A pairwise similarity matrix: symmetric, 1.0 on the diagonal (but for empty items)."""


def token_set(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.casefold()))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def cosine_matrix(vectors: Sequence[Sequence[float]] | npt.NDArray[np.floating[Any]],
                  ) -> npt.NDArray[np.float64]:
    """Pairwise cosine of the vectors."""
    v = np.array(vectors, dtype=np.float64)
    v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    return np.asarray(v @ v.T, dtype=np.float64)


def jaccard_matrix(sets: Sequence[frozenset[str]]) -> Similarities:
    """Pairwise Jaccard overlap of the word sets (1.0 for two empty sets)."""
    n = len(sets)
    # only words two items share can meet: the others count in the sizes alone
    shared = [t for t, c in Counter(chain.from_iterable(sets)).items() if c > 1]
    vocab = dict(zip(shared, range(len(shared)), strict=True))
    rows: list[int] = []
    cols: list[int] = []
    for i, ts in enumerate(sets):
        for t in ts:
            if (j := vocab.get(t)) is not None:
                rows.append(i)
                cols.append(j)
    x = np.zeros((n, max(len(vocab), 1)), dtype=np.float32)  # 0/1: the products are exact
    x[rows, cols] = 1.0
    return _jaccard(x, np.array([len(ts) for ts in sets], dtype=np.float32))


def _jaccard(x: npt.NDArray[np.float32], sizes: npt.NDArray[np.float32]) -> Similarities:
    """The overlaps of the items whose shared words are the 0/1 rows of ``x`` and whose
    set sizes are ``sizes``: float32 (counts up to 2**24 are exact; each overlap is
    within 6e-8 of the exact fraction), computed in place."""
    inter = x @ x.T
    np.fill_diagonal(inter, sizes)
    union = np.add.outer(sizes, sizes)
    union -= inter
    empty = np.flatnonzero(sizes == 0)
    if len(empty):  # else no union is below 1
        np.maximum(union, 1.0, out=union)
    inter /= union
    if len(empty):
        inter[np.ix_(empty, empty)] = 1.0  # two empty sets are alike
    return inter


def word_ids(words: frozenset[str]) -> list[int]:
    """The words as distinct integers for :func:`jaccard_of_words`, ascending: their
    hashes, which are the same for the same word within one process (64-bit: a
    collision of two words is as good as impossible)."""
    return sorted({hash(w) for w in words})


def jaccard_of_words(every: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64],
                     ) -> Similarities:
    """:func:`jaccard_matrix` of word sets laid end to end: ``every`` holds the distinct
    word ids (:func:`word_ids`) of each set in turn, ``lengths`` how many each has. The
    same values, with the bookkeeping in numpy."""
    n = len(lengths)
    x = np.zeros((n, 1), dtype=np.float32)
    if len(every):  # only words two items share can meet: a column each, ascending
        order = np.argsort(every)
        ordered = every[order]
        same = ordered[1:] == ordered[:-1]  # the word before is the same
        shared = np.zeros(len(every), dtype=bool)
        shared[1:] = same
        shared[:-1] |= same
        if shared.any():
            first = shared.copy()
            first[1:] &= ~same  # the first of a shared word
            column = np.cumsum(first) - 1
            x = np.zeros((n, int(column[-1]) + 1), dtype=np.float32)
            x[np.repeat(np.arange(n), lengths)[order[shared]], column[shared]] = 1.0
    return _jaccard(x, lengths.astype(np.float32))


def similarity_matrix(items: Sequence[Scored[T]]) -> Similarities:
    """Pairwise similarity: cosine when every item has a vector, token Jaccard otherwise."""
    if items and all(it.vector is not None for it in items):
        return cosine_matrix([v for it in items if (v := it.vector) is not None])
    return jaccard_matrix([it.tokens if it.tokens is not None else token_set(it.text)
                           for it in items])


def mmr_order(relevance: Sequence[float] | npt.NDArray[np.float64], matrix: Similarities,
              k: int, *,
              lambda_: float = 0.7) -> list[int]:
    """:func:`mmr` on plain values: the indices of up to ``k`` picks, in order, given
    each item's relevance and the pairwise similarity matrix (symmetric: the row of
    an item is its column); ``lambda_`` in 0..1.

    Each item's value ``lambda * relevance - (1 - lambda) * max similarity to the picks``
    is kept as the smallest of ``lambda * relevance - (1 - lambda) * similarity`` over
    the picks so far (one row per pick, all computed at once, in float64): the same
    values as subtracting the largest penalty at every step (a subtraction's rounding
    keeps the order of what it subtracts), with one array operation per pick less."""
    if not 0.0 <= lambda_ <= 1.0:
        raise ValueError(f"lambda_ must be within 0..1, not {lambda_}")
    n = len(relevance)
    gain = lambda_ * np.array(relevance, dtype=np.float64)
    after = np.subtract(gain, np.multiply(matrix, 1.0 - lambda_, dtype=np.float64))
    value = gain  # row p of ``after``: each item's value were p its most similar pick
    order: list[int] = []
    for _ in range(min(max(k, 0), n)):
        best = int(value.argmax())
        order.append(best)
        value[best] = -np.inf  # taken
        np.minimum(value, after[best], out=value)
    return order


def mmr(
    items: Sequence[Scored[T]],
    k: int,
    *,
    lambda_: float = 0.7,
    similarity: Similarity[T] | None = None,
) -> list[Scored[T]]:
    """Up to ``k`` items in MMR order (the most relevant first).

    ``lambda_ = 1`` is plain relevance order; lower values penalise
    near-duplicates of what was already picked more strongly. Ties keep the
    input order. Without ``similarity`` the pairwise matrix is computed once
    (cosine or Jaccard, see :func:`similarity_matrix`).
    """
    n = len(items)
    if k <= 0 or n == 0:
        return []
    if similarity is None:
        order = mmr_order([it.score for it in items], similarity_matrix(items), k,
                          lambda_=lambda_)
        return [items[i] for i in order]
    relevance = np.array([it.score for it in items], dtype=np.float64)
    max_sim = np.zeros(n, dtype=np.float64)
    taken = np.zeros(n, dtype=bool)
    chosen: list[Scored[T]] = []
    for _ in range(min(k, n)):
        value = lambda_ * relevance - (1.0 - lambda_) * max_sim
        value[taken] = -np.inf
        best = int(np.argmax(value))
        taken[best] = True
        chosen.append(items[best])
        column = np.array(
            [0.0 if taken[i] else similarity(items[i], items[best]) for i in range(n)]
        )
        np.maximum(max_sim, column, out=max_sim)
    return chosen
