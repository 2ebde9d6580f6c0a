"""The judge's parts of a long session."""

from __future__ import annotations

from datetime import UTC, datetime

from streams.consolidation.judge import MemoryJudge
from streams.memory.model import SourceMessage

T = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def test_a_long_session_is_judged_in_parts_that_fit_the_budget() -> None:
    judge = MemoryJudge(count_tokens=lambda s: len(s.split()), max_input_tokens=700)
    new = [SourceMessage(f"e{i}", "user", "word " * 100, T) for i in range(10)]
    context = [SourceMessage("c0", "user", "context", T, new=False)]
    parts = judge.parts(context, new)
    assert len(parts) > 1
    assert [m.event_id for p in parts for m in p if m.new] == [f"e{i}" for i in range(10)]
    assert parts[0][0].event_id == "c0"
    # a later part shows the tail of the part before it as (old) context
    old = [m.event_id for m in parts[1] if not m.new]
    assert old and old == [m.event_id for m in parts[0] if m.new][-len(old):]
    assert MemoryJudge(count_tokens=lambda s: 1).parts(context, new[:2]) == [context + new[:2]]
