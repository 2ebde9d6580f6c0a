"""Ranking what an external provider returns, on memstream's own scale.

memstream's ``relativity`` (the query's relevance floor) and ``min_score`` cut
relative to the best hit of a query, as the built-in provider scores. MemOS and
Mem0 score on scales of their own and apply their floors as absolute values
(MemOS' ``relativity`` under a constant-score reranker, Mem0's ``threshold``
on a hybrid score that halves once any candidate has a keyword hit), so an
absolute floor sent to them drops relevant memories. Their clients therefore
ask with no floor and pass the answer through :func:`reranked`.

Two signals, each 0..1 with the best hit at 1:

- the provider's: its scores divided by the best one; when it scores every
  hit the same (MemOS 2.0.32 under its default reranker: 0.5 for all) its
  order is all it says, so the signal is the position, ``1 - i / n``;
- memstream's own: BM25 of the query over the returned memories
  (:mod:`streams.memory.rules.lexical`, the built-in retrieval's analysis).

They are mixed ``(1 - w) * provider + w * lexical``, the result rescaled so the
best is 1.0, ordered (ties keep the provider's order), and what falls below
``relativity`` dropped — for each cube on its own (:func:`reranked_per_cube`),
as the built-in provider ranks, so a user's many memories never push the
agent's few out. ``w`` = :data:`LEXICAL_WEIGHT`, chosen by
``make bench-provider-ranking`` (docs/benchmarks.md); ``w = 0`` is the
provider's order alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from streams.memory.model import StoredMemory, by_score
from streams.memory.rules.lexical import bm25, query_terms, term_counts, tokenize

LEXICAL_WEIGHT = 0.75
_SAME = 1e-9


def provider_signal(found: Sequence[StoredMemory]) -> list[float]:
    """The provider's scores relative to its best, or its order when they are all equal."""
    scores = [max(m.score, 0.0) for m in found]
    if not scores:
        return []
    best = max(scores)
    if best - min(scores) <= _SAME:
        n = len(scores)
        return [1.0 - i / n for i in range(n)]
    return [s / best for s in scores]


def lexical_signal(query: str, found: Sequence[StoredMemory]) -> list[float]:
    """BM25 of ``query`` over the contents of ``found``, divided by the best (0: no term)."""
    postings: dict[str, list[tuple[str, int]]] = {}
    lengths: dict[str, int] = {}
    for i, m in enumerate(found):
        terms = tokenize(m.content)
        lengths[str(i)] = len(terms)
        for term, tf in term_counts(terms).items():
            postings.setdefault(term, []).append((str(i), tf))
    avg = sum(lengths.values()) / len(lengths) if lengths else 1.0
    scores = bm25(query_terms(query), postings, lengths, len(found), avg)
    best = max(scores.values(), default=0.0)
    return [scores.get(str(i), 0.0) / best if best > 0 else 0.0 for i in range(len(found))]


def reranked(query: str, found: Sequence[StoredMemory], relativity: float, *,
             lexical_weight: float = LEXICAL_WEIGHT) -> list[StoredMemory]:
    """``found`` (in the provider's order) scored and ordered as the module doc says."""
    if not found:
        return []
    own = lexical_signal(query, found) if lexical_weight > 0 else [0.0] * len(found)
    mixed = [(1 - lexical_weight) * p + lexical_weight * lex
             for p, lex in zip(provider_signal(found), own, strict=True)]
    best = max(mixed)
    if best <= 0:
        return list(found)
    order = sorted(range(len(found)), key=lambda i: mixed[i], reverse=True)
    out = [replace(found[i], score=round(mixed[i] / best, 6)) for i in order]
    return [m for m in out if m.score >= relativity]


def reranked_per_cube(query: str, found: Sequence[StoredMemory], relativity: float, *,
                      lexical_weight: float = LEXICAL_WEIGHT) -> list[StoredMemory]:
    """:func:`reranked` for the memories of each cube apart, merged best first."""
    by_cube: dict[str, list[StoredMemory]] = {}
    for m in found:
        by_cube.setdefault(m.cube, []).append(m)
    out = [m for ms in by_cube.values()
           for m in reranked(query, ms, relativity, lexical_weight=lexical_weight)]
    return sorted(out, key=by_score, reverse=True)
