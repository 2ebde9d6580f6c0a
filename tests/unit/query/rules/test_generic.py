"""Queries with no content words, in English and Chinese."""

from __future__ import annotations

import pytest

from streams.query.rules.generic import content_terms, is_generic


@pytest.mark.parametrize(
    "text",
    [
        "What do you know about me?",
        "Anything I should remember?",
        "Tell me about myself.",
        "What did you learn?",
        "Do you remember anything?",
        "Hi!",
        "Thanks!",
        "你知道我什么？",
        "你都知道关于我的哪些事情？",
        "有什么我应该记住的吗？",
        "你好",
    ],
)
def test_generic(text: str) -> None:
    assert is_generic(text) and content_terms(text) == []


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("What do you know about my job?", ["job"]),
        ("Do you remember my dog?", ["dog"]),
        ("Where am I going in June?", ["june"]),
        ("Book me a flight to Lisbon", ["book", "flight", "lisbon"]),
        ("我住在哪里？", ["住", "在", "哪", "里", "住在", "在哪", "哪里"]),
        ("你知道我的狗叫什么吗？", ["狗", "叫", "狗叫"]),
    ],
)
def test_not_generic(text: str, terms: list[str]) -> None:
    assert not is_generic(text) and content_terms(text) == terms


def test_an_empty_query_is_not_generic() -> None:
    assert not is_generic("") and not is_generic("   ")
