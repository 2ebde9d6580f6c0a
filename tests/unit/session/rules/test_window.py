from __future__ import annotations

from typing import Any

import pytest

from streams.session.rules.window import (
    MESSAGE_OVERHEAD_TOKENS,
    build_window,
    fit_tokens,
    newest_alternating_run,
    split_roles,
    truncate_to_tokens,
)


def words(text: str) -> int:
    """A token counter for tests: one token per word."""
    return len(text.split())


def m(role: str, content: str = "x", **kw: Any) -> dict[str, Any]:
    return {"role": role, "content": content, **kw}


def roles(ms: list[dict[str, Any]]) -> str:
    return "".join(x["role"][0] for x in ms)


@pytest.mark.parametrize(
    ("seq", "expected"),
    [
        ("", ""),
        ("u", "u"),
        ("a", ""),
        ("ua", "ua"),
        ("au", "u"),
        ("aua", "ua"),
        ("uaua", "uaua"),
        ("uauu", "uau"),  # of two user turns in a row the newer stays
        ("uuaua", "uaua"),
        ("uaaua", "uaua"),
        ("aauu", "u"),
        ("uuuu", "u"),
    ],
)
def test_alternation(seq: str, expected: str) -> None:
    ms = [m({"u": "user", "a": "assistant"}[c], f"{c}{i}") for i, c in enumerate(seq)]
    assert roles(newest_alternating_run(ms)) == expected


def test_the_newer_of_a_repeated_role_stays() -> None:
    ms = [m("user", "first"), m("user", "second"), m("assistant", "reply")]
    assert [x["content"] for x in newest_alternating_run(ms)] == ["second", "reply"]


def test_split_keeps_system_and_tool_apart() -> None:
    ms = [m("system", "rules"), m("user", "q"), m("assistant", "", tool_calls=[{"id": "1"}]),
          m("tool", "result"), m("assistant", "answer")]
    s = split_roles(ms)
    assert roles(s.chat) == "ua"
    assert [x["content"] for x in s.system] == ["rules"]
    assert roles(s.tool) == "at"


def test_whole_history_when_it_fits() -> None:
    chat = [m("user", "a b c"), m("assistant", "d e")]
    w = fit_tokens(chat, "a summary", max_tokens=100, summary_budget=50, count=words)
    assert w.messages == chat and not w.truncated and not w.summary_used
    assert w.tokens == 5 + 2 * MESSAGE_OVERHEAD_TOKENS


@pytest.mark.parametrize(
    ("max_tokens", "summary", "budget", "kept", "summary_used"),
    [
        # each message costs 10 + 4 = 14 tokens; 10 messages = 140
        (140, None, 20, 10, False),
        (139, None, 20, 9, False),  # no summary: the whole window goes to messages
        (139, "s " * 5, 20, 8, True),  # 139 - 20 = 119 -> 8 messages
        (100, "s " * 5, 30, 5, True),  # 70 -> 5 messages
        (100, "s " * 5, 100, 0, True),
    ],
)
def test_token_window(max_tokens: int, summary: str | None, budget: int, kept: int,
                      summary_used: bool) -> None:
    chat = [m("user" if i % 2 == 0 else "assistant", " ".join(["w"] * 10)) for i in range(10)]
    w = fit_tokens(chat, summary, max_tokens=max_tokens, summary_budget=budget, count=words)
    body = [x for x in w.messages if x.get("kind") != "summary"]
    assert len(body) == kept
    assert body == chat[len(chat) - kept:]  # the newest ones
    assert w.summary_used is summary_used
    if summary_used:
        assert w.messages[0]["role"] == "system" and w.messages[0]["kind"] == "summary"
        assert w.tokens <= max_tokens


def test_summary_is_cut_to_its_budget() -> None:
    chat = [m("user", "w " * 50)]
    long_summary = " ".join(f"fact{i}" for i in range(500))
    w = fit_tokens(chat, long_summary, max_tokens=40, summary_budget=20, count=words)
    assert w.summary_used
    assert words(w.messages[0]["content"]) <= 20


@pytest.mark.parametrize(("limit", "expect_max"), [(0, 0), (3, 3), (100, 10)])
def test_truncate_to_tokens(limit: int, expect_max: int) -> None:
    text = "one two three four five six seven eight nine ten"
    out = truncate_to_tokens(text, limit, words)
    assert words(out) <= expect_max
    assert text.startswith(out)


def test_build_window_applies_all_rules() -> None:
    ms = [m("assistant", "hi"), m("system", "be nice"), m("user", "q1"), m("user", "q2"),
          m("assistant", "a2"), m("tool", "t")]
    w = build_window(ms, None, max_tokens=1000, summary_budget=100, count=words)
    assert [x["content"] for x in w.messages] == ["q2", "a2"]
    assert [x["content"] for x in w.system] == ["be nice"]
    assert [x["content"] for x in w.tool] == ["t"]
    assert w.dropped_by_alternation == 2


def test_alternation_can_be_turned_off() -> None:
    ms = [m("user", "q1"), m("user", "q2")]
    w = build_window(ms, None, max_tokens=1000, summary_budget=100, count=words,
                     enforce_alternation=False)
    assert len(w.messages) == 2
