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

T = TypeVar("T")

_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Scored(Generic[T]):
    """An item to rank: its payload, relevance, text, and optionally a vector."""

    item: T
    score: float
    text: str = ""
    vector: Sequence[float] | None = None


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


def default_similarity(items: Sequence[Scored[T]]) -> Similarity[T]:
    """Cosine when every item carries a vector, token Jaccard otherwise."""
    if items and all(it.vector is not None for it in items):

        def by_vector(a: Scored[T], b: Scored[T]) -> float:
            assert a.vector is not None and b.vector is not None
            return cosine(a.vector, b.vector)

        return by_vector
    cache: dict[int, frozenset[str]] = {}

    def tokens(it: Scored[T]) -> frozenset[str]:
        key = id(it)
        if key not in cache:
            cache[key] = token_set(it.text)
        return cache[key]

    def by_tokens(a: Scored[T], b: Scored[T]) -> float:
        return jaccard(tokens(a), tokens(b))

    return by_tokens


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
    input order.
    """
    if k <= 0 or not items:
        return []
    sim = similarity or default_similarity(items)
    pool = list(items)
    chosen: list[Scored[T]] = []
    max_sim = [0.0] * len(pool)
    alive = list(range(len(pool)))
    while alive and len(chosen) < k:
        best_i, best_val = alive[0], -math.inf
        for i in alive:
            val = lambda_ * pool[i].score - (1.0 - lambda_) * max_sim[i]
            if val > best_val:
                best_i, best_val = i, val
        picked = pool[best_i]
        chosen.append(picked)
        alive.remove(best_i)
        for i in alive:
            s = sim(pool[i], picked)
            if s > max_sim[i]:
                max_sim[i] = s
    return chosen
