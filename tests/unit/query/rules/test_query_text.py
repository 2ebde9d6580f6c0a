from __future__ import annotations

import pytest

from streams.query.rules.query_text import build_query_text


def test_the_message_alone() -> None:
    assert build_query_text("  what do I like?  ") == "what do I like?"


def test_at_most_200_characters_of_context() -> None:
    context = "x" * 150 + "y" * 100
    text = build_query_text("question", context)
    assert text == "question\n" + "x" * 150 + "y" * 50
    assert len(text) - len("question\n") == 200


@pytest.mark.parametrize("context", [None, "", "   \n "])
def test_empty_context_adds_nothing(context: str | None) -> None:
    assert build_query_text("question", context) == "question"


def test_the_context_limit_is_a_parameter() -> None:
    assert build_query_text("q", "abcdef", max_context_chars=3) == "q\nabc"
    assert build_query_text("q", "abcdef", max_context_chars=0) == "q"


def test_a_short_context_is_kept_whole() -> None:
    assert build_query_text("q", "  earlier: we talked about Rome ") == (
        "q\nearlier: we talked about Rome"
    )
