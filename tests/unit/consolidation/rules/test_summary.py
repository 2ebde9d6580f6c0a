"""Session summaries: the threshold, the extractive summary and the model prompt."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from streams.consolidation.rules.summary import (
    build_summary_messages,
    extractive_summary,
    needs_summary,
)
from streams.memory.model import SourceMessage

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def words(text: str) -> int:
    return len(text.split())


def conversation(*turns: tuple[str, str]) -> list[SourceMessage]:
    out = []
    for i, (who, content) in enumerate(turns):
        role, _, name = who.partition(":")
        at = T0 + timedelta(minutes=i)
        out.append(SourceMessage(f"e{i}", role, content, at, name=name or None))
    return out


@pytest.mark.parametrize(
    ("unsummarized", "threshold", "due"),
    [(0, 20, False), (19, 20, False), (20, 20, True), (21, 20, True), (5, 5, True), (4, 5, False),
     (0, 0, False), (1, 0, True)],
)
def test_needs_summary(unsummarized: int, threshold: int, due: bool) -> None:
    assert needs_summary(unsummarized, threshold) is due


def test_default_threshold_is_twenty() -> None:
    assert not needs_summary(19) and needs_summary(20)


SESSION = conversation(
    ("user:Caroline", "Hi! How are you?"),
    ("assistant", "Great, thanks! How can I help?"),
    ("user:Caroline", "I moved to Berlin last month. I love the parks here."),
    ("assistant", "Berlin has wonderful parks."),
    ("user:Caroline", "Which museum should I visit first?"),
    ("assistant", "Start with the Pergamon Museum. It is closed on Mondays."),
    ("user:Caroline", "OK, let's plan the visit for Saturday."),
    ("tool", "Lesson learned: tool output is not read."),
    ("user:Caroline", "Please remember that I'm vegetarian."),
    ("assistant", "Noted! Lesson learned: ask about diet before suggesting restaurants."),
)


def test_extractive_summary_keeps_salient_lines_in_order() -> None:
    assert extractive_summary(SESSION, count=words).splitlines() == [
        "Caroline: I moved to Berlin last month.",
        "Caroline: I love the parks here.",
        "Caroline: Which museum should I visit first?",
        "assistant: Start with the Pergamon Museum.",
        "Caroline: OK, let's plan the visit for Saturday.",
        "Caroline: I'm vegetarian.",
        "assistant: ask about diet before suggesting restaurants.",
    ]


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        pytest.param(0, [], id="nothing-fits"),
        pytest.param(4, ["Caroline: I'm vegetarian."], id="remember-first"),
        pytest.param(12, ["Caroline: I moved to Berlin last month.",
                          "Caroline: I'm vegetarian."], id="and-changes"),
        pytest.param(21, ["Caroline: I moved to Berlin last month.",
                          "Caroline: OK, let's plan the visit for Saturday.",
                          "Caroline: I'm vegetarian."], id="then-decisions"),
        pytest.param(28, ["Caroline: I moved to Berlin last month.",
                          "Caroline: I love the parks here.",
                          "Caroline: OK, let's plan the visit for Saturday.",
                          "Caroline: I'm vegetarian."],
                     id="then-newest-facts-that-fit"),
    ],
)
def test_budget_takes_units_by_priority(budget: int, expected: list[str]) -> None:
    summary = extractive_summary(SESSION, budget_tokens=budget, count=words)
    assert summary.splitlines() == expected
    assert sum(words(line) + 1 for line in summary.splitlines()) <= budget


def test_question_and_answer_are_kept_together() -> None:
    full = extractive_summary(SESSION, count=words).splitlines()
    qa = [
        "Caroline: Which museum should I visit first?",
        "assistant: Start with the Pergamon Museum.",
    ]
    budget = sum(words(line) + 1 for line in full) - 1  # one token short of everything
    summary = extractive_summary(SESSION, budget_tokens=budget, count=words).splitlines()
    assert not any(line in summary for line in qa)  # the pair goes as a whole
    assert summary == [line for line in full if line not in qa]


@pytest.mark.parametrize(
    "turns",
    [
        pytest.param([("user", "Hi!"), ("assistant", "Hello! How are you?"),
                      ("user", "How are you?"), ("assistant", "Fine.")], id="small-talk"),
        pytest.param([("user", "你好"), ("assistant", "你好！")], id="chinese-small-talk"),
        pytest.param([], id="empty"),
        pytest.param([("user", "What time is it in Tokyo?")], id="unanswered-question"),
    ],
)
def test_nothing_salient_gives_empty_summary(turns: list[tuple[str, str]]) -> None:
    assert extractive_summary(conversation(*turns), count=words) == ""


def test_extractive_summary_chinese() -> None:
    session = conversation(("user", "你好！我叫小明。我住在上海。"), ("assistant", "你好小明！"),
                           ("user", "那就周六去博物馆吧。"))
    assert extractive_summary(session, count=len).splitlines() == [
        "user: 我叫小明。", "user: 我住在上海。", "user: 那就周六去博物馆吧。",
    ]


def test_extractive_summary_is_deterministic() -> None:
    runs = {extractive_summary(SESSION, budget_tokens=15, count=words) for _ in range(3)}
    assert len(runs) == 1


def test_summary_prompt() -> None:
    system, user = build_summary_messages("Caroline lives in Berlin.", SESSION, budget_tokens=1500)
    assert "1500 tokens" in system["content"]
    lines = user["content"].splitlines()
    assert lines[:2] == ["Previous summary:", "Caroline lives in Berlin."]
    line = "2024-05-01 10:02 Caroline: I moved to Berlin last month. I love the parks here."
    assert line in lines
    assert not any("tool output" in line for line in lines)  # tool messages are not shown
    assert sum(1 for line in lines if line.startswith("2024-")) == len(SESSION) - 1


@pytest.mark.parametrize("previous", [None, "", "   "])
def test_summary_prompt_without_previous_summary(previous: str | None) -> None:
    _, user = build_summary_messages(previous, SESSION[:1], budget_tokens=2000)
    assert user["content"].startswith("Previous summary:\n(none)\n\nNew messages:\n")
