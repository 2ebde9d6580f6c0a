"""What a caller gets in a reply's long-term part (built-in provider on SQLite, the
worker's consolidation and query engine): the user's strongest memories for a
query that names nothing, the agent's own lessons for every query, and never a
fact beside the episode it was judged from."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from streams.memory.model import USER_CUBE
from streams.wire.query import MemoryReply
from tests.agents.builtin_sqlite import BuiltinStack, builtin_stack

TRIP = [("user", "Hi! I'm planning a trip to Lisbon in June."),
        ("assistant", "Great, which dates?"),
        ("user", "Please remember that I'm vegetarian."),
        ("assistant", "Noted. Lesson learned: the flights API needs dates in ISO format."),
        ("user", "That works for me. I work at Siemens."),
        ("assistant", "Next time I should ask for the budget first."),
        ("user", "I love hiking."),
        ("assistant", "Lisbon has lovely trails.")]
LESSONS = {"the flights API needs dates in ISO format.",
           "Next time I should ask for the budget first."}


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[BuiltinStack]:
    async with builtin_stack(tmp_path) as s:
        await s.session(TRIP)
        yield s


def user_facts(reply: MemoryReply) -> list[str]:
    return [m.content for m in reply.memories if m.cube == USER_CUBE and m.kind == "fact"]


@pytest.mark.parametrize("question", ["What do you know about me?",
                                      "Anything I should remember?", "你都知道我什么？"])
async def test_a_query_with_no_content_words_gets_the_strongest_memories(
    stack: BuiltinStack, question: str
) -> None:
    reply = await stack.ask(question)
    assert reply.long_term.ranked_by == "strength"
    # facts first, by importance: remembered on request, then the preference, then the fact
    assert user_facts(reply)[:3] == ["I'm vegetarian.", "I love hiking.", "I work at Siemens."]
    assert "I'm vegetarian." in reply.user_profile and "I love hiking." in reply.user_profile
    assert {line.split("] ", 1)[1] for line in reply.agent_memory.splitlines()} == LESSONS


async def test_the_strongest_memories_stay_within_the_budget(stack: BuiltinStack) -> None:
    reply = await stack.ask("What do you know about me?", top_k=2, budget=30)
    assert len(reply.memories) == 2 and reply.budget is not None
    assert 0 < reply.budget.tokens_used <= 30
    assert reply.user_profile.splitlines()[0].endswith("I'm vegetarian.")


async def test_a_query_with_content_words_is_ranked_by_relevance(stack: BuiltinStack) -> None:
    reply = await stack.ask("Which trails are there for hiking?")
    assert reply.long_term.ranked_by == "relevance"
    # the user's own words first: an assistant's turn counts 0.3 times its match
    # (MEMSTREAM_RANKING__ASSISTANT_WEIGHT), and gains as the user's neighbour
    assert [m.content for m in reply.memories] == [
        "User: I love hiking.", "Assistant: Lisbon has lovely trails."]
    # the fact judged from the turn ("I love hiking.") is not listed beside it: the turn has
    # a session and neighbours to gain from (MEMSTREAM_RANKING__SESSION_WEIGHT,
    # __NEIGHBOUR_WEIGHT), the fact has none, and it falls under the relativity floor
    assert "I love hiking." not in [m.content for m in reply.memories]


async def test_the_agents_lesson_is_returned_beside_the_users_memories(
    stack: BuiltinStack,
) -> None:
    """The user's cube matches "Lisbon" strongly; the agent's lesson about flights,
    in its own cube, is ranked against its own cube and reaches agent_memory."""
    reply = await stack.ask("Book me a flight to Lisbon")
    assert "Lisbon" in reply.user_profile
    assert reply.agent_memory.endswith("the flights API needs dates in ISO format.")
    [lesson] = [m for m in reply.memories if m.cube == "agent_travel"]
    assert lesson.score == 1.0


async def test_a_fact_and_its_episode_never_both_take_a_place(stack: BuiltinStack) -> None:
    reply = await stack.ask("I'd like vegetarian food and hiking trails, and I work at Siemens")
    sources = [(m.kind, e) for m in reply.memories for e in m.source_event_ids]
    events = [e for _, e in sources]
    assert len(events) == len(set(events)), reply.memories  # one memory per chat turn
    covered = {i for m in reply.memories for i in m.covers}
    assert covered and not covered & {m.id for m in reply.memories}
    by_id = {m.id: m for m in reply.memories}
    kept = [m for m in reply.memories if m.covers]
    assert all(by_id[m.id].kind == "fact" for m in kept if m.content == "I'm vegetarian.")
    assert not any(i in reply.budget.memory_ids for i in covered)  # type: ignore[union-attr]


@pytest.mark.parametrize("question", [
    "Plan a seven day dinner menu for the family reunion in Lisbon next month, mindful of my "
    "vegetarian diet",
    "Am I vegetarian?",
])
async def test_a_long_request_naming_one_remembered_thing_finds_it_without_an_embedder(
        stack: BuiltinStack, question: str) -> None:
    """Lexical only (the default deployment): the cube's best match holds one word of many
    in the request, but a word that says what is asked, so the cube is not judged far
    from the request (its confidence stays 1)."""
    reply = await stack.ask(question)
    assert "vegetarian" in reply.user_profile, reply.memories
