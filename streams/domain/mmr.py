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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

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


def similarity_matrix(items: Sequence[Scored[T]]) -> npt.NDArray[np.float64]:
    """Pairwise similarity: cosine when every item has a vector, token Jaccard otherwise."""
    n = len(items)
    if n and all(it.vector is not None for it in items):
        v = np.array([it.vector for it in items], dtype=np.float64)
        v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        return np.asarray(v @ v.T, dtype=np.float64)
    sets = [it.tokens if it.tokens is not None else token_set(it.text) for it in items]
    # only words two items share can meet: the others count in the sizes alone
    seen: dict[str, int] = {}
    for ts in sets:
        for t in ts:
            seen[t] = seen.get(t, 0) + 1
    vocab = {t: i for i, t in enumerate(t for t, c in seen.items() if c > 1)}
    x = np.zeros((n, max(len(vocab), 1)), dtype=np.float32)  # 0/1: the products are exact
    for i, ts in enumerate(sets):
        x[i, [vocab[t] for t in ts if t in vocab]] = 1.0
    inter = np.asarray(x @ x.T, dtype=np.float64)
    sizes = np.array([len(ts) for ts in sets], dtype=np.float64)
    np.fill_diagonal(inter, sizes)
    union = sizes[:, None] + sizes[None, :] - inter
    return np.where(union > 0, inter / np.maximum(union, 1.0), 1.0)


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
    matrix = similarity_matrix(items) if similarity is None else None
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
        if matrix is not None:
            column = matrix[:, best]
        else:
            assert similarity is not None
            column = np.array(
                [0.0 if taken[i] else similarity(items[i], items[best]) for i in range(n)]
            )
        np.maximum(max_sim, column, out=max_sim)
    return chosen
