"""Questions about how something went over time, and the outline's lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.query.rules.timeline import asks_over_time, outline_line


@pytest.mark.parametrize(
    "text",
    [
        "In what order did I try the three diets?",
        "Can you list, in order, the places I lived?",
        "What was the order in which I contacted the landlords?",
        "Give me a chronological account of my visa application.",
        "What's the timeline of the kitchen renovation?",
        "Tell me the sequence of steps I took to fix the build.",
        "Summarize what I told you about the wedding.",
        "Can you give me a summary of my marathon training?",
        "A quick recap of the migration, please.",
        "An overview of my job search would help.",
        "How has my sleep improved over the last month?",
        "How have my plans for the garden changed since spring?",
        "How did the thesis develop throughout the semester?",
        "How has the app evolved across our chats?",
        "How much progress have we made on the edits so far?",
        "IN WHAT ORDER did I read those books?",
    ],
)
def test_questions_about_time_are_read(text: str) -> None:
    assert asks_over_time(text)


@pytest.mark.parametrize(
    "text",
    [
        "Can you walk me through how to prove two triangles are congruent?",
        "Explain step by step how to compute the median.",
        "What did I order for dinner on Friday?",
        "I need the cables in order to finish the build.",
        "Which sequence alignment tool did I pick?",  # no "sequence of"
        "How do I change the oil?",
        "How did my interview go?",
        "What is my favourite colour?",
        "When did I move to Berlin?",
        "",
    ],
)
def test_other_questions_are_not(text: str) -> None:
    assert not asks_over_time(text)


def test_only_the_head_of_a_long_text_is_read() -> None:
    assert not asks_over_time("x " * 2000 + "in what order did I do it?")


ZH_FIRST = "我们决定在四月上线第一个版本，包括登录、预算和图表功能，然后再做导出功能和提醒功能。"


@pytest.mark.parametrize(
    ("text", "max_chars", "line"),
    [
        ("User: I'm planning the MVP for the middle of April. It needs login and charts.", 160,
         "User: I'm planning the MVP for the middle of April."),
        ("User: I'm planning the MVP for April. It needs login, budgets and charts.", 160,
         "User: I'm planning the MVP for April. It needs login, budgets and charts."),
        # a first sentence shorter than MIN_SENTENCE does not end the line
        ("Sure. Here is the plan for the whole project, step by step. Then more.", 160,
         "Sure. Here is the plan for the whole project, step by step."),
        # no sentence end within max_chars: cut at a word
        ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu", 30,
         "alpha beta gamma delta epsilon"),
        ("alpha beta gamma delta epsilonzeta eta theta iota kappa lambda mu", 30,
         "alpha beta gamma delta"),
        ("short text", 160, "short text"),
        ("a" * 50, 20, "a" * 20),  # one word longer than the line: cut inside it
        ("  padded first sentence that is long enough to count.  And more.", 160,
         "padded first sentence that is long enough to count."),
        ("Line one is a heading of a long answer here\n- item\n- item", 160,
         "Line one is a heading of a long answer here"),
        (ZH_FIRST + "之后还要写文档和测试。", 160, ZH_FIRST),
        ("", 160, ""),
    ],
)
def test_outline_line(text: str, max_chars: int, line: str) -> None:
    assert outline_line(text, max_chars) == line


@given(st.text(max_size=400), st.integers(min_value=1, max_value=300))
def test_a_line_is_a_prefix_of_the_text_within_the_bound(text: str, max_chars: int) -> None:
    line = outline_line(text, max_chars)
    assert len(line) <= max(max_chars, 0)
    assert text.strip().startswith(line)




LOCOMO_DEV = Path(__file__).resolve().parents[5] / "shared" / "bench" / "locomo-dev.json"


@pytest.mark.skipif(not LOCOMO_DEV.exists(), reason="the LoCoMo dev conversations are not here")
def test_few_locomo_questions_are_read_as_one() -> None:
    """LoCoMo's questions ask for facts and dates: nearly all replies stay whole memories
    (two of the 999 ask how something improved since a time)."""
    questions = [qa["question"] for conv in json.loads(LOCOMO_DEV.read_text())
                 for qa in conv["qa"]]
    read = [q for q in questions if asks_over_time(q)]
    assert len(questions) > 900 and len(read) <= 0.005 * len(questions), read
    assert all(q.startswith("How has") and " since " in q for q in read), read
