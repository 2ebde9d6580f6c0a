"""The strongest memories: facts first, then importance, then the newer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from streams.memory.model import StoredMemory
from streams.memory.rules.strength import strongest_first

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def mem(mid: str, importance: float, day: int | None, kind: str = "fact") -> StoredMemory:
    return StoredMemory(id=mid, content=mid, cube="user_profile", importance=importance,
                        event_time=None if day is None else T0 + timedelta(days=day),
                        kind=kind)  # type: ignore[arg-type]


def test_facts_first_then_importance_then_the_newer() -> None:
    memories = [mem("old-pref", 0.7, 1), mem("episode", 0.3, 9, "episode"),
                mem("new-pref", 0.7, 5), mem("remembered", 0.9, 0), mem("fact", 0.6, 8),
                mem("undated", 0.6, None), mem("event", 0.5, 7, "episode")]
    ranked = strongest_first(memories)
    assert [m.id for m in ranked] == ["remembered", "new-pref", "old-pref", "fact", "undated",
                                      "event", "episode"]


def test_scores_fall_with_the_order_and_the_best_is_one() -> None:
    ranked = strongest_first([mem("weak-fact", 0.2, 1), mem("episode", 0.3, 2, "episode"),
                              mem("fact", 0.6, 1)])
    assert [(m.id, m.score) for m in ranked] == [
        ("fact", 1.0), ("weak-fact", 0.3333), ("episode", 0.3333)]
    assert strongest_first([]) == []
