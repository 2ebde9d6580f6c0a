"""The strongest memories of a cube, for a query that names nothing to look for.

Order, with no weights: facts before episodes (the judged memories before the
raw turns they came from), then by importance (the judge's: remembered on
request 0.9, corrections 0.8, preferences 0.7, facts and lessons 0.6, events
0.5, episodes 0.3 — where the memory's type counts), then the newer first.
Each memory's score is its importance relative to the strongest one's, never
above the score of the memory before it: the best is 1.0 as in a relevance
search, and the budget, which takes memories by score, takes them in this order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

from streams.memory.model import StoredMemory

_NEVER = datetime.min.replace(tzinfo=UTC)


def strength_key(m: StoredMemory) -> tuple[bool, float, datetime]:
    """Larger is stronger: (is a fact, importance, event time)."""
    when = m.event_time if m.event_time is not None else _NEVER
    return (m.kind != "episode", m.importance, when if when.tzinfo else when.replace(tzinfo=UTC))


def strongest_first(memories: Sequence[StoredMemory]) -> list[StoredMemory]:
    """``memories`` strongest first, each scored by its importance relative to the first's."""
    ranked = sorted(memories, key=strength_key, reverse=True)
    if not ranked:
        return []
    top = max(m.importance for m in ranked)
    out: list[StoredMemory] = []
    last = 1.0
    for m in ranked:
        last = min(last, round(max(m.importance, 0.0) / top, 4) if top > 0 else 1.0)
        out.append(replace(m, score=last))
    return out
