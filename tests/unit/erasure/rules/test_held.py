"""Which held memories a finished erasure names: table-driven, no event loop."""

from __future__ import annotations

from datetime import datetime

import pytest

from streams.erasure.model import ErasureMark, MemorySource, Target
from streams.erasure.rules.held import held_scopes
from streams.memory.model import USER_CUBE, HeldScopes

CUTOFF = datetime(2026, 12, 1, 12, 0, 0)


def mark(target: Target, subject: str, source: MemorySource | None = None) -> ErasureMark:
    return ErasureMark("e-1", "t1", target, subject, CUTOFF, {}, source, 7)


@pytest.mark.parametrize(("erased", "held"), [
    (mark("tenant", "t1"), HeldScopes("t1")),
    (mark("conversation", "c1"), HeldScopes("t1")),  # its cubes are not recorded
    (mark("user", "u1"), HeldScopes("t1", user_id="u1")),
    (mark("memory", "42", MemorySource(USER_CUBE, "u1", frozenset({"e1"}))),
     HeldScopes("t1", cube=USER_CUBE, owner="u1", memory_ids=frozenset({"42"}))),
    (mark("memory", "42", MemorySource("agent_a1", "u1", frozenset())),
     HeldScopes("t1", cube="agent_a1", owner="", memory_ids=frozenset({"42"}))),
    (mark("memory", "42"), HeldScopes("t1")),  # where it came from unknown
])
def test_what_an_erasure_names(erased: ErasureMark, held: HeldScopes) -> None:
    assert held_scopes(erased) == held
