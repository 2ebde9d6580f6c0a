"""A query naming a date finds what was said then (built-in provider on SQLite, the
worker's consolidation and query engine, the ranking settings as configured)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from streams.settings import RankingSettings
from tests.agents.builtin_sqlite import T0, BuiltinStack, builtin_stack

# three days of dinners, in the same words; the April one matches them least
SESSIONS = {0: [("user", "Pasta for dinner again, dinner is pasta.")],  # March 1
            20: [("user", "We had pasta for dinner at home.")],  # March 21
            40: [("user", "For dinner we had pasta at the old harbour.")]}
APRIL = "User: For dinner we had pasta at the old harbour."
MARCH_21 = "User: We had pasta for dinner at home."
ON_APRIL_10 = f"What did I have for dinner on {T0 + timedelta(days=40):%B %-d, %Y}?"


async def ranked(stack: BuiltinStack, question: str) -> list[str]:
    for day, lines in SESSIONS.items():
        await stack.session(lines, day=day)
    return [m.content for m in (await stack.ask(question)).memories if m.kind == "episode"]


@pytest.mark.parametrize(("ranking", "before"), [
    (RankingSettings(), (APRIL, MARCH_21)),
    (RankingSettings(date_lift=0.0), (MARCH_21, APRIL)),  # off: the words alone decide
])
async def test_a_query_naming_a_day_lifts_what_was_said_that_day(
    tmp_path: Path, ranking: RankingSettings, before: tuple[str, str],
) -> None:
    async with builtin_stack(tmp_path, ranking) as stack:
        episodes = await ranked(stack, ON_APRIL_10)
    assert episodes.index(before[0]) < episodes.index(before[1])


async def test_a_query_naming_no_date_is_ranked_as_without_the_lift(tmp_path: Path) -> None:
    async with builtin_stack(tmp_path) as stack:
        lifted = await ranked(stack, "What did I have for dinner?")
    (tmp_path / "off").mkdir()
    async with builtin_stack(tmp_path / "off", RankingSettings(date_lift=0.0)) as stack:
        plain = await ranked(stack, "What did I have for dinner?")
    assert lifted == plain and APRIL in lifted
    assert lifted.index(MARCH_21) < lifted.index(APRIL)
