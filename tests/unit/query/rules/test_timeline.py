"""Questions about how something went over time, and the outline's lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.memory.model import StoredMemory
from streams.memory.rules.lexical import tokenize
from streams.query.rules.timeline import asks_over_time, outline_line, outlined, topic_terms


@pytest.mark.parametrize(
    "text",
    [
        "In what order did I try the three diets?",
        "Can you list, in order, the places I lived?",
        "List the courses in the order I took them.",
        "What was the order in which I contacted the landlords?",
        "Give me a chronological account of my visa application.",
        "What's the timeline of my kitchen renovation?",
        "Tell me the sequence of steps I took to fix the build.",
        "Summarize what I told you about the wedding.",
        "Can you give me a summary of my marathon training?",
        "A quick recap of our migration, please.",
        "Sum up my job search.",
        "What's the history of my back pain?",
        "An overview of my job search would help.",
        "How has my sleep improved over the last month?",
        "How have my plans for the garden changed since spring?",
        "How did my thesis develop throughout the semester?",
        "How has my resume evolved?",
        "How is my project progressing?",
        "How has my running grown since January?",
        "How did my savings grow over the year?",
        "How much progress have we made on the edits so far?",
        "Rank my trips from earliest to latest.",
        "IN WHAT ORDER did I read those books?",
        "Tell me how my resume has developed over the past months.",
        "Can you show how my Spanish has improved so far?",
        "Describe how our onboarding flow evolved over time.",
        "按时间顺序列出我读过的书。",
        "总结一下我的项目进展。",
        "我的计划是怎么变化的？",
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
        "In order for the deploy to pass, which env vars do I need?",
        "Are my visa documents in order?",
        "List my tasks in order of priority.",
        "What's the order of magnitude of my electricity bill?",
        "Summarize this article for me.",
        "Give me an overview of the Kafka architecture.",
        "Translate 'timeline' into German for my slides.",
        "Generate a Fibonacci sequence of length 10.",
        "What's the timeline of the French revolution?",
        "How do I change my password since I forgot it?",
        "How can I improve my code across the modules?",
        "How did my interview go?",
        "What is my favourite colour?",
        "When did I move to Berlin?",
        "What's the history of the Roman Empire? I'm curious.",
        "Give me a timeline of World War I.",
        "Summarize the meeting notes I pasted above.",
        "Summarize the diff, I need it for the PR.",
        "How did you change the function I gave you?",
        "How did the change I made to the API affect latency?",
        "How did the user feedback influence the UI/UX improvements I made before launch?",
        "How did the developments at my company affect the changes I proposed?",
        "Tell me the order in which I should take these pills.",
        "请总结一下这篇文章，我要用",
        "我们公司的发展方向是什么？",
        "我想了解一下中国的发展历史。",
        "",
    ],
)
def test_other_questions_are_not(text: str) -> None:
    assert not asks_over_time(text)


def test_only_the_head_of_a_long_text_is_read() -> None:
    assert not asks_over_time("x " * 2000 + "in what order did I do it?")


ZH_RUN = "我们决定在四月上线第一个版本"
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
        # a run without spaces (Chinese, a URL) is cut hard, not back to the speaker's name
        ("User: " + ZH_RUN * 20, 30, "User: " + (ZH_RUN * 2)[:24]),
        ("User: https://example.com/" + "x" * 300 + " is the repo", 60,
         ("User: https://example.com/" + "x" * 300)[:60]),
        # runs of whitespace are one space; no word ends in the second half: cut hard
        ("a" + " " * 150 + "b " + "c" * 200, 160, ("a b " + "c" * 200)[:160]),
    ],
)
def test_outline_line(text: str, max_chars: int, line: str) -> None:
    assert outline_line(text, max_chars) == line


@given(st.text(max_size=400), st.integers(min_value=1, max_value=300))
def test_a_line_is_a_prefix_of_the_text_within_the_bound(text: str, max_chars: int) -> None:
    line = outline_line(text, max_chars)
    assert len(line) <= max(max_chars, 0)
    assert " ".join(text.split()).startswith(line)  # on one line: whitespace runs one space




ROOT = Path(__file__).resolve().parents[4]
LOCOMO_DEV = ROOT.parent / "shared" / "bench" / "locomo-dev.json"  # beside the checkout


@pytest.mark.skipif(not LOCOMO_DEV.exists(), reason="the LoCoMo dev conversations are not here")
def test_no_locomo_question_is_read_as_one() -> None:
    """LoCoMo's questions ask about two people's facts and dates ("How has John's fitness
    improved since…" speaks of John, not of the user's own history): their replies stay
    whole memories."""
    questions = [qa["question"] for conv in json.loads(LOCOMO_DEV.read_text())
                 for qa in conv["qa"]]
    assert len(questions) > 900
    assert [q for q in questions if asks_over_time(q)] == []


ANSWER = ("User: I started planning the garden project this spring, it is going well. "
          "Also, I moved to Berlin in March and found a flat near the river. "
          "The rest of the week was quiet and nothing much else happened at all.")


@pytest.mark.parametrize(("question", "line"), [
    # the sentence holding most of the question's words, after the speaker's name
    ("What's the timeline of my move to Berlin?",
     "User: Also, I moved to Berlin in March and found a flat near the river."),
    # none held, or a tie: the first
    ("What's the timeline of my tax return?",
     "User: I started planning the garden project this spring, it is going well."),
])
def test_the_line_is_the_sentence_that_matches(question: str, line: str) -> None:
    assert outline_line(ANSWER, 160, tokenize(question), speaker="User") == line


def memory(i: int, content: str, cube: str = "user_profile") -> StoredMemory:
    return StoredMemory(id=str(i), content=content, cube=cube, score=1 - i / 10)


def test_a_line_repeated_in_a_cube_is_left_out() -> None:
    boiler = "Assistant: Great question! Let me summarize where things stand for you today."
    kept = outlined([memory(1, boiler + " One."), memory(2, "User: " + ANSWER[6:]),
                     memory(3, boiler + " Two."), memory(4, boiler, cube="agent_x")], 160, ())
    assert [m.id for m in kept] == ["1", "2", "4"]
    assert kept[0].content == boiler


@pytest.mark.parametrize(("text", "speaker", "line"), [
    # the chosen sentence names its own speaker: no second name, and not the first one's
    ("Assistant: Here is what you told me earlier in our chat today.\n"
     "User: I will move to Berlin in March next year for work.", "Assistant",
     "User: I will move to Berlin in March next year for work."),
    # a fact's "Dislikes:" is no speaker: nothing is put before another sentence
    ("Dislikes: mushrooms, olives and anchovies on any pizza at all. "
     "The user loves pineapple on pizza and orders it weekly.", None,
     "The user loves pineapple on pizza and orders it weekly."),
    # a list on several lines is one line
    ("User: my plan for moving day\n- pack boxes\n- book movers for the Berlin move\n"
     "- cancel internet", "User", "User: - book movers for the Berlin move - cancel internet"),
])
def test_the_speaker_is_named_once(text: str, speaker: str | None, line: str) -> None:
    assert outline_line(text, 160, tokenize("my move to Berlin pineapple"), speaker) == line


def test_the_words_that_ask_for_an_order_are_no_topic() -> None:
    terms = tokenize("What's the timeline of my move to Berlin, in order?")
    assert set(topic_terms(terms)) == set(tokenize("What's the of my move to Berlin, in?"))
