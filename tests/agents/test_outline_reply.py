"""A question about how something went over time gets an outline: each memory as its
first sentence, so the budget reaches the many sessions that answer it (built-in
provider on SQLite, the worker's consolidation and query engine)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from streams.query.rules.timeline import OUTLINE_CHARS
from streams.wire.query import MemoryReply
from tests.agents.builtin_sqlite import BuiltinStack, builtin_stack

ASPECTS = ["raised beds", "drip irrigation", "compost bins", "tomato seedlings",
           "the greenhouse frame", "pest netting", "the rain barrel", "fruit trees",
           "the herb spiral", "mulching paths", "a cold frame", "the pond liner"]
FILLER = ("I measured everything twice and sketched the layout on paper, then compared "
          "prices at three shops near me and read a few forum threads about it. My "
          "neighbour had tried something similar last year and gave me some advice, "
          "which I wrote down in my notebook before going to bed that evening. ")


def opener(aspect: str) -> str:
    return (f"For my garden project I'm now starting on {aspect}, and I want it done "
            f"before the season begins. " + FILLER * 2)


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[BuiltinStack]:
    async with builtin_stack(tmp_path) as s:
        for day, aspect in enumerate(ASPECTS):
            await s.session([("user", opener(aspect)),
                             ("assistant", f"Good plan for {aspect}. " + FILLER)], day=day * 7)
        yield s


def sessions_in_budget(reply: MemoryReply) -> int:
    assert reply.budget is not None
    return len({e.split("-")[0] for e in reply.budget.source_event_ids})


QUESTION = "In what order did I bring up the parts of my garden project?"


async def test_a_question_about_order_gets_an_outline_of_many_sessions(
    stack: BuiltinStack,
) -> None:
    reply = await stack.ask(QUESTION, budget=800)
    assert reply.long_term.outline
    assert reply.memories and all(len(m.content) <= OUTLINE_CHARS for m in reply.memories)
    assert all(m.content.startswith("User: For my garden project I'm now starting on")
               for m in reply.memories if m.content.startswith("User:"))
    outlined = sessions_in_budget(reply)

    stack.engine.config = replace(stack.engine.config, outline_chars=0)  # whole memories
    whole = await stack.ask(QUESTION, budget=800)
    assert not whole.long_term.outline
    assert any(len(m.content) > OUTLINE_CHARS for m in whole.memories)
    assert outlined >= 2 * sessions_in_budget(whole), (outlined, sessions_in_budget(whole))
    assert outlined == len(ASPECTS)


async def test_the_outline_is_in_date_order_in_the_budget(stack: BuiltinStack) -> None:
    reply = await stack.ask("Summarize how my garden project progressed over time.",
                            budget=2000)
    assert reply.long_term.outline
    dates = [line for line in reply.user_profile.splitlines() if line.startswith("[")]
    assert dates == sorted(dates) and len(dates) == len(ASPECTS)
    found = [a for a in ASPECTS if a in reply.user_profile]
    assert found == ASPECTS  # every aspect, in the order it was brought up


async def test_other_questions_get_whole_memories(stack: BuiltinStack) -> None:
    reply = await stack.ask("What did my neighbour advise about the drip irrigation?")
    assert not reply.long_term.outline
    assert any(len(m.content) > OUTLINE_CHARS for m in reply.memories)
