"""Scores relative to the best hit, whatever scale a provider scores on.

memstream's ``relativity`` (the query's relevance floor) and ``min_score`` cut
relative to the best hit of a query, as the built-in provider scores. MemOS and
Mem0 score on scales of their own and apply their floors as absolute values
(MemOS' ``relativity`` under a constant-score reranker, Mem0's ``threshold``
on a hybrid score that halves once any candidate has a keyword hit), so an
absolute floor sent to them drops relevant memories. Their clients therefore
ask with no floor and pass the answer through :func:`relative_to_best`: each
score divided by the best one (the best becomes 1.0, the order is kept), and
what falls below ``relativity`` dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from streams.memory.model import StoredMemory


def relative_to_best(found: Sequence[StoredMemory], relativity: float) -> list[StoredMemory]:
    """``found`` (best first) with scores relative to the best, below ``relativity`` gone."""
    best = max((m.score for m in found), default=0.0)
    if best <= 0:
        return list(found)
    out = [replace(m, score=round(m.score / best, 6)) for m in found]
    return [m for m in out if m.score >= relativity]
