"""The scripted models' reading of the judge and conflict prompts (tests/fakes/model_prompts.py)
against the prompts the worker builds, and their answers through the worker's parsers."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from streams.consolidation.rules.conflicts import build_conflict_messages, parse_conflict_output
from streams.consolidation.rules.llm_judge import build_judge_messages, parse_judge_output
from streams.memory.model import MemoryCandidate, SourceMessage, StoredMemory
from tests.fakes import model_prompts as prompts

pytestmark = pytest.mark.unit
T = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


def test_the_judge_prompts_new_user_lines_are_read_and_answered() -> None:
    session = [
        SourceMessage("e0", "user", "I live in Porto.", T, new=False),
        SourceMessage("e1", "user", "Actually I moved to Lisbon.\nNear the river.", T),
        SourceMessage("e2", "assistant", "Lisbon is lovely.", T),
        SourceMessage("e3", "user", "我搬到了里斯本。", T),
    ]
    system, user = (m["content"] for m in build_judge_messages(session))
    assert system.startswith(prompts.JUDGE)
    lines = prompts.new_user_lines(user)
    assert lines == [(1, "Actually I moved to Lisbon. Near the river."), (3, "我搬到了里斯本。")]
    got = parse_judge_output(prompts.judged(lines), [m for m in session if m.new])
    assert [(c.content, c.source_event_ids) for c in got] == [
        ("Actually I moved to Lisbon. Near the river.", ("e1",)), ("我搬到了里斯本。", ("e3",))]


def test_the_conflict_prompts_new_memories_and_their_stored_ones_are_read_and_answered() -> None:
    new = [MemoryCandidate(content="I live in Lisbon.", event_time=T),
           MemoryCandidate(content="I have a cat.", event_time=None)]
    shown = [[StoredMemory("41", "I live in Porto.", "user_profile", event_time=T),
              StoredMemory("42", "I like tea.", "user_profile")], []]
    system, user = (m["content"] for m in build_conflict_messages("user_profile", new, shown))
    assert system.startswith(prompts.CONFLICT)
    read = prompts.new_memories(user)
    assert read == [
        prompts.NewMemory(1, "I live in Lisbon.",
                          [("41", "I live in Porto."), ("42", "I like tea.")]),
        prompts.NewMemory(2, "I have a cat.", [])]
    answer = prompts.decided([(1, "supersede", ["41"]), (2, "store", [])])
    assert [(d.action, d.expire_ids) for d in parse_conflict_output(answer, new, shown)] == [
        ("supersede", ["41"]), ("store", [])]
