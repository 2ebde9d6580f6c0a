"""What a cache dropped since a read began: named drops, a clear, drops forgotten."""

from __future__ import annotations

from streams.memory.model import HeldScopes
from streams.memory.providers.builtin.drops import Drops


def test_a_read_learns_what_was_dropped_after_it_began() -> None:
    drops = Drops(kept=2)
    began = drops.generation
    assert drops.since(began) == []
    drops.drop(HeldScopes("t1"))
    later = drops.generation
    drops.drop(HeldScopes("t2"))
    assert drops.since(began) == [HeldScopes("t1"), HeldScopes("t2")]
    assert drops.since(later) == [HeldScopes("t2")]
    drops.drop(HeldScopes("t3"))  # t1's drop is forgotten: a read before it hears "all"
    assert drops.since(began) is None
    assert drops.since(later) == [HeldScopes("t2"), HeldScopes("t3")]
    drops.clear()
    assert drops.since(later) is None and drops.since(drops.generation) == []
