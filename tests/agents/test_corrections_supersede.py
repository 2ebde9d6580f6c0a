"""A correction said later replaces the fact it corrects, however it is phrased and
however much small talk the cube holds, and a related statement replaces nothing
(the rule judge, the built-in provider on SQLite, through the composition root)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.agents.builtin_sqlite import BuiltinStack, builtin_stack

SMALL_TALK = [("user", "That works for me."), ("assistant", "Does that work for you?"),
              ("user", "We're moving the meeting, it works better."),
              ("assistant", "Great, that works."), ("user", "Working late again, haha.")]


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[BuiltinStack]:
    async with builtin_stack(tmp_path) as s:
        yield s


async def said(stack: BuiltinStack, fact: str, later: str) -> dict[str, tuple[bool, str | None]]:
    """``fact`` in a first session among small talk, ``later`` a week after."""
    await stack.session([*SMALL_TALK, ("user", fact), ("assistant", "Noted."), *SMALL_TALK])
    await stack.session([*SMALL_TALK, *SMALL_TALK, ("user", later), ("assistant", "OK.")],
                        day=7)
    return await stack.facts()


@pytest.mark.parametrize(
    ("fact", "later"),
    [
        ("I live in Porto.", "Actually I moved to Lisbon."),
        ("I work at Siemens.", "Actually I work at Bosch now."),
        ("I work as a nurse.", "I changed careers and now work as a teacher."),
        ("I'm vegetarian.", "I'm not vegetarian anymore."),
        ("I have a dog named Rex.", "I no longer have a dog."),
        ("I like coffee.", "I switched from coffee to tea."),
        ("我住在北京。", "我搬到上海了。"),
        ("我在腾讯工作。", "我已经不在腾讯上班了。"),
    ],
)
async def test_a_correction_supersedes_the_fact_among_small_talk(
    stack: BuiltinStack, fact: str, later: str
) -> None:
    facts = await said(stack, fact, later)
    valid, by = facts[fact]
    assert not valid and by == await stack.memory_id(later.removeprefix("Actually "))


@pytest.mark.parametrize(
    ("fact", "later"),
    [
        ("I live in Porto.", "My friend moved to Lisbon."),
        ("I live in Porto.", "I visited Lisbon last year."),
        ("I work at Siemens.", "My brother works at Bosch."),
        ("I have a dog named Rex.", "I also have a cat."),
        ("我住在北京。", "我朋友搬到上海了。"),
    ],
)
async def test_a_related_statement_replaces_nothing(
    stack: BuiltinStack, fact: str, later: str
) -> None:
    facts = await said(stack, fact, later)
    assert facts[fact] == (True, None)
    assert all(valid for valid, _ in facts.values())
