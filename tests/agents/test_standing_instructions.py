"""A user's standing instruction ("Always include version numbers when I ask about
libraries") leads the reply to a later request it governs, though that request shares
more words with the project's own turns; a request it does not govern is left alone
(built-in provider on SQLite, the worker's consolidation and query engine)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from streams.settings import RankingSettings
from tests.agents.builtin_sqlite import BuiltinStack, builtin_stack

INSTRUCTION = ("Always include version numbers when I ask about software dependencies or "
               "libraries used.")
WORK = [f"In my Flask project the libraries used for {part} are {names}." for part, names in [
    ("the models", "SQLAlchemy and Alembic"), ("forms", "WTForms and Flask-WTF"),
    ("calling the weather API", "requests and httpx"), ("reports", "pandas and openpyxl"),
    ("charts", "Chart.js and D3"), ("password hashing", "bcrypt and argon2-cffi"),
    ("tests", "pytest and factory-boy"), ("e-mail", "Flask-Mail and Jinja2"),
]]
SMALL_TALK = "I went for a long walk by the river this morning and the weather was lovely."


async def stack_with(tmp: Path, floor: float | None) -> AsyncIterator[BuiltinStack]:
    async with builtin_stack(tmp, RankingSettings(instruction_floor=floor)) as s:
        await s.session([("user", INSTRUCTION), ("assistant", "Got it, I will.")], day=0)
        for day, line in enumerate(WORK, start=1):
            await s.session([("user", line), ("assistant", "Sounds good. " * 20)], day=day)
        await s.session([("user", SMALL_TALK), ("assistant", "Lovely!")], day=9)
        yield s


@pytest.fixture
async def lifted(tmp_path: Path) -> AsyncIterator[BuiltinStack]:
    async for s in stack_with(tmp_path, RankingSettings().instruction_floor):
        yield s


@pytest.fixture
async def plain(tmp_path: Path) -> AsyncIterator[BuiltinStack]:
    async for s in stack_with(tmp_path, None):
        yield s


def rank(contents: list[str]) -> int | None:
    return next((i for i, c in enumerate(contents) if INSTRUCTION in c), None)


QUESTION = "Which libraries are used in my Flask project?"


async def test_the_instruction_leads_the_reply_to_a_request_it_governs(
        lifted: BuiltinStack) -> None:
    reply = await lifted.ask(QUESTION)
    assert rank([m.content for m in reply.memories]) == 0, [m.content for m in reply.memories]
    assert INSTRUCTION in reply.user_profile  # inside the budget
    facts = await lifted.facts()
    assert facts.get(INSTRUCTION) == (True, None)  # also judged a fact of its own


async def test_without_the_lift_it_ranks_below_the_projects_turns(plain: BuiltinStack) -> None:
    reply = await plain.ask(QUESTION)
    at = rank([m.content for m in reply.memories])
    assert at is None or at >= 3, [m.content for m in reply.memories]


async def test_a_request_it_does_not_govern_is_left_alone(lifted: BuiltinStack) -> None:
    reply = await lifted.ask("How was my walk by the river?")
    assert rank([m.content for m in reply.memories]) != 0
