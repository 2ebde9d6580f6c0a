"""Facts worth keeping: the check, on facts the rule judge made of agent conversations
before it applied it, and on facts a reader keeps."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from streams.consolidation.rules.fact_quality import defect, prose
from streams.consolidation.rules.rule_judge import clauses, rule_judge
from streams.memory.model import SourceMessage


@pytest.mark.parametrize(("text", "expected"), [
    # kept: statements about the speaker or their work
    ("I'm using Flask 2.3.1 and SQLAlchemy 2.0.19", None),
    ("I have a deadline of April 1, 2024, for the first sprint", None),
    ("I've never implemented any Bootstrap components in this project", None),
    ("I prefer simple, minimal dependencies", None),
    ("My goal is to achieve 100% test coverage.", None),
    ("These days I work as a nurse.", None),  # a time, not a word leaning on another
    ("This week I moved to Lisbon.", None),
    ("I go running most mornings these days.", None),
    ("I'm Caroline.", None),
    ("我住在上海", None),
    # what the judge made before, that a reader would not keep
    ("I've got a function that looks something like this:", "dangling"),
    ("And sticking to my schedule is key.", None),  # "And" opens it, leaning on nothing
    ("So I moved to Lisbon last month.", None),
    ("Yeah, I'm vegan now.", None),
    ("Well, I live in Berlin now.", None),
    ("So can you check my code", "question"),
    ("Plus, it gives me peace of mind knowing I have a seat reserved.", "dangling"),
    ("That way, I can change or cancel it if my visa is delayed.", "dangling"),
    ("These are the ones I kept.", "dangling"),
    ("I have them scheduled for November 21 and 23 at 4 PM AST", "dangling"),
    ("I found these 3 idioms inspired by the Montserrat dialect", "dangling"),
    ("I sold those at the market last spring", "dangling"),
    ("if I have 10 problems to solve", "dangling"),
    ("I need help completing the password hashing and verification logic", "request"),
    ("can you help me implement user session management with Flask-Login", "question"),
    ("I'd love some tips, I need help with the layout", "request"),
    ("Could you check my code", "question"),
    ("How should I structure the tests?", "question"),
    ("I want to make sure my navbar is responsive and works well on desktop devices.", "intent"),
    ("I'm trying to understand the difference between permutations and combinations", "intent"),
    ("I'm having trouble understanding how to classify triangles", "intent"),
    ("<p>I'm Craig, a Colour Technologist from Port Michael.</p>", "markup"),
    ("× 343/365 ≈ 0.493, and then subtracting that from 1", "markup"),
    ("I won't just use \\( 4!", "markup"),
    ("Done.", "fragment"),
    ("I'm using " + "Flask and more " * 30, "long"),
])
def test_what_keeps_a_text_from_being_a_fact(text: str, expected: str | None) -> None:
    assert defect(text) == expected


def test_prose_leaves_out_code_quotes_and_tables_and_keeps_inline_code_words() -> None:
    text = ("Here is a sample journal entry:\n\n```\nNext time, I should take a short break.\n"
            "```\n> Next time I should rest more.\n| a | b |\nI added the `is-invalid` class.")
    got = prose(text)
    assert "short break" not in got and "rest more" not in got and "| a |" not in got
    assert "I added the is-invalid class." in got


@pytest.mark.parametrize(("sentence", "parts"), [
    ("I live in Berlin.", ["I live in Berlin."]),
    ("When I was young, I lived in Rome.", ["When I was young, I lived in Rome."]),
    ("I'm using Prettier v2.8 and ESLint v8.39, and I want to make sure that my code is "
     "formatted, can you check it?",
     ["I'm using Prettier v2.8 and ESLint v8.39", "I want to make sure that my code is formatted",
      "can you check it?"]),
    ("I'm trying to optimize the dashboard API response time, which has recently improved to "
     "250ms, but I want to use the latest versions",
     ["I'm trying to optimize the dashboard API response time, which has recently improved to "
      "250ms", "I want to use the latest versions"]),
])
def test_a_run_on_sentence_is_read_clause_by_clause(sentence: str, parts: list[str]) -> None:
    assert clauses(sentence) == parts


def judged(text: str, role: str = "user") -> list[tuple[str, float]]:
    msg = SourceMessage("e1", role, text, datetime(2024, 5, 1, tzinfo=UTC))
    return [(c.content, c.importance) for c in rule_judge([msg])]


@pytest.mark.parametrize(("text", "expected"), [
    # a help request is no preference, and no fact
    ("I need help completing the password hashing logic, can you provide an example?", []),
    # the new value of something: a correction, even said while asking
    ("I'm trying to increase the unit test coverage for my API integration, which has recently "
     "improved to 78%.",
     [("I'm trying to increase the unit test coverage for my API integration, which has "
       "recently improved to 78%.", 0.8)]),
    ("I'm kinda worried that moving the Zoom call with the creative director to April 22 at "
     "11 AM might conflict with other meetings, can you help me check my schedule?",
     [("I'm kinda worried that moving the Zoom call with the creative director to April 22 at "
       "11 AM might conflict with other meetings", 0.8)]),
    ("The number of commits merged into the main branch has now reached 165, so I'm looking "
     "for advice.", []),  # no speaker's own statement
    ("I've added 52 sources to my Zotero library, how can I efficiently organize them?",
     [("I've added 52 sources to my Zotero library", 0.8)]),
    # a value of the speaker's project: a fact
    ("I'm using Flask 2.3.1, Python 3.11, and SQLite 3.39.",
     [("I'm using Flask 2.3.1, Python 3.11, and SQLite 3.39.", 0.6)]),
    ("I've never written any Flask routes or handled HTTP requests in this project before.",
     [("I've never written any Flask routes or handled HTTP requests in this project before.",
       0.6)]),
    # a statement opened by "So", "Well", "Yeah": the statement, corrections included
    ("So I moved to Lisbon last month.", [("So I moved to Lisbon last month.", 0.8)]),
    ("Yeah, I'm vegan now.", [("I'm vegan now.", 0.8)]),
    ("I'm trying to lose weight, I'm vegetarian and I live in Porto.",
     [("I'm vegetarian and I live in Porto.", 0.6)]),
    # a quoted example inside an answer is no lesson of the agent
    ("Here's a sample journal entry:\n\n```\nNext time, I should take a short break to "
     "maintain energy levels.\n```", []),
])
def test_the_judge_keeps_only_facts_worth_keeping(text: str,
                                                  expected: list[tuple[str, float]]) -> None:
    role = "assistant" if text.startswith("Here's") else "user"
    assert judged(text, role) == expected
