"""Agent conversations through Kafka: a person and an assistant, long answers with code,
a project whose figures change. Each test is one defect seen on such conversations:
one long answer kept whole and cut at 2,000 characters, a stale figure ranked above
its update, an agent cube's only memory in every reply, 40 % of the budget left
unused, facts nobody would keep, and one goal retiring another."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import pytest_asyncio

from streams.client import MemoryClient
from streams.wire.query import MemoryReply
from tests.integration.conftest import Stack
from tests.support.services import KAFKA_BOOTSTRAP
from tests.support.worker import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")
TENANT, USER, AGENT, OTHER = "t-agents", "craig", "coder", "dana"
T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)

CODE = "\n".join(f"    cache.set('dashboard:{i}', summary_for(user_id, {i}), timeout=300)"
                 for i in range(24))
LONG_ANSWER = f"""Great question! Let's speed up the dashboard in three steps.

### Step 1: Cache the summaries

Flask-Caching keeps each user's summary for five minutes, so repeated loads skip the
database entirely. Here is the helper:

```python
def warm_dashboard(cache, user_id):
{CODE}
```

### Step 2: Index the transactions table

The slow part of the dashboard query is the scan of transactions by user and date.
Add a composite index on transactions(user_id, date): the dashboard filters on both,
so SQLite can answer from the index alone. Run ANALYZE afterwards so the planner
knows the new statistics.

### Step 3: Measure again

- Log the response time of the dashboard endpoint for a day.
- Compare the 95th percentile before and after each step.
- Keep the slow query log on while you do it.

For your project journal, here is a sample entry you can adapt:

```
Today I profiled the dashboard. Next time, I should take a short break to maintain
energy levels.
```
"""
assert len(LONG_ANSWER) > 2000 and LONG_ANSWER.index("composite index") > 2000
FILLER = ("I'm tracking my {topic} budget at {n} dollars a month and I have logged {m} "
          "{topic} transactions since the start of the year in the tracker. The {topic} "
          "category has its own monthly budget line, its own chart on the dashboard and a "
          "note explaining why the {topic} spending changed from last month.")
TOPICS = ["grocery", "rent", "travel", "coffee", "gym", "books", "cinema", "garden", "fuel",
          "phone", "internet", "music", "clothes", "gifts", "health", "school", "pets", "taxi",
          "bakery", "hobby", "parking", "insurance", "charity", "repairs", "games", "tools",
          "camping", "museum", "dentist", "laundry", "printing", "software", "hosting",
          "stationery", "flowers", "bicycle", "train", "ferry", "theatre", "concerts"]


def message(n: int, conv: str, role: str, content: str, at: datetime,
            user: str = USER) -> dict[str, Any]:
    return {"event_id": f"{conv}-{n}", "type": "message", "tenant_id": TENANT,
            "user_id": user, "agent_id": AGENT, "conversation_id": conv, "role": role,
            "content": content, "created_at": at.isoformat()}


def end(conv: str, at: datetime, n: int, user: str = USER) -> dict[str, Any]:
    return {"event_id": f"{conv}-end-{n}", "type": "session_end", "tenant_id": TENANT,
            "user_id": user, "agent_id": AGENT, "conversation_id": conv,
            "created_at": at.isoformat()}


def conversation() -> tuple[list[dict[str, Any]], int]:
    """Craig's project over four sessions and Dana's one, with a session end each."""
    events: list[dict[str, Any]] = []
    sessions: list[list[tuple[str, str]]] = [
        [("user", "I'm building a budget tracker with Flask. The dashboard API response time "
                  "is about 400ms right now and I want to speed it up."),
         ("assistant", LONG_ANSWER),
         ("user", "I've got a function that looks something like this:\n```python\n"
                  "def slow(user_id):\n    return db.all(user_id)\n```"),
         ("user", "I need help completing the password hashing and verification logic."),
         ("user", "My goal is to improve expense classification and make it easier to track "
                  "spending habits.")],
        [("user", "My goal is to further improve the maintainability score."),
         ("assistant", "Good plan: keep functions small and add type hints as you go.")],
        [("user", "Quick update: the dashboard API response time has recently improved to "
                  "250ms after adding some caching tweaks."),
         ("assistant", "Nice, that caching paid off.")],
        [("user", FILLER.format(topic=t, n=40 + i, m=3 + i)) for i, t in enumerate(TOPICS)],
    ]
    n = 0
    for s, turns in enumerate(sessions):
        at = T0 + timedelta(days=10 * s)
        for i, (role, content) in enumerate(turns):
            events.append(message(n, "proj", role, content, at + timedelta(minutes=i)))
            n += 1
        events.append(end("proj", at + timedelta(minutes=len(turns)), s))
    dana = T0 + timedelta(days=5)
    events += [message(0, "dana", "user", "Can you book the call with Lima for Tuesday?", dana,
                       OTHER),
               message(1, "dana", "assistant", "Booked. Lesson learned: confirm the time zone "
                       "before booking a meeting.", dana + timedelta(minutes=1), OTHER),
               end("dana", dana + timedelta(minutes=2), 0, OTHER)]
    return events, len(sessions) + 1


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def consolidated(shared_stack: Stack) -> AsyncIterator[Stack]:
    s = shared_stack
    s.extra_env.update({"MEMSTREAM_EMBEDDING__KIND": "local"})
    worker = s.worker().start()
    events, sessions = conversation()
    await s.produce(events)
    await eventually(lambda: s.sql(
        "SELECT COUNT(*) FROM consolidation_run WHERE status = 'done'")[0][0] == str(sessions),
        180, "every session consolidated")
    yield s
    worker.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(consolidated: Stack) -> AsyncIterator[MemoryClient]:
    async with MemoryClient(KAFKA_BOOTSTRAP, request_topic=consolidated.topics["queries"],
                            reply_topic=f"{consolidated.name}.replies", timeout_s=30) as c:
        yield c


async def ask(client: MemoryClient, message: str, **kw: Any) -> MemoryReply:
    reply = await client.query(tenant_id=TENANT, user_id=USER, agent_id=AGENT, message=message,
                               conversation_id=f"q-{abs(hash(message))}", **kw)
    assert reply.error is None, reply.error
    return reply


def first(reply: MemoryReply, text: str) -> int | None:
    return next((i for i, m in enumerate(reply.memories) if text in m.content), None)


async def test_a_long_answer_is_kept_as_passages_and_its_middle_is_found(
        client: MemoryClient) -> None:
    reply = await ask(client, "Which composite index did you suggest for the transactions "
                              "table?", top_k=10)
    found = [m for m in reply.memories if "composite index" in m.content]
    assert found, [m.content[:60] for m in reply.memories]
    passage = found[0]
    assert passage.source_event_ids == ["proj-1"] and passage.source_span is not None
    start, stop = passage.source_span
    assert passage.content == "Assistant: " + LONG_ANSWER[start:stop]
    assert len(passage.content) <= 1000 + len("Assistant: ")
    assert "proj-1" in (reply.budget.source_event_ids if reply.budget else [])


async def test_the_newer_value_ranks_above_the_one_it_updates(client: MemoryClient) -> None:
    reply = await ask(client, "What is the average response time of the dashboard API?")
    new, old = first(reply, "250ms"), first(reply, "400ms")
    assert new is not None, [m.content[:60] for m in reply.memories]
    assert old is None or new < old, [m.content[:60] for m in reply.memories]


async def test_an_agent_cubes_only_memory_stays_out_of_unrelated_replies(
        client: MemoryClient) -> None:
    for question in ("How do I add a composite index to speed up the dashboard queries?",
                     "What is my grocery budget?",
                     "How many coffee transactions have I logged?"):
        reply = await ask(client, question)
        assert not [m.content for m in reply.memories if m.cube == f"agent_{AGENT}"], question
        assert reply.agent_memory == "", question


async def test_the_user_cube_takes_the_budget_the_agent_cube_leaves(
        client: MemoryClient) -> None:
    reply = await ask(client, "What are my monthly budgets and how many transactions have I "
                              "logged for each category in the tracker?",
                      long_memory_token_budget=4000, top_k=50)
    assert reply.budget is not None
    assert reply.agent_memory == ""
    assert reply.budget.tokens_used > 0.6 * 4000, reply.budget.tokens_used


async def test_only_facts_worth_keeping_are_kept_and_a_new_goal_retires_none(
        consolidated: Stack) -> None:
    facts = consolidated.sql(
        "SELECT content, valid_to IS NULL, cube FROM memory WHERE kind = 'fact'")
    texts = [f[0] for f in facts]
    assert not any("looks something like this" in t for t in texts), texts
    assert not any("I need help" in t for t in texts), texts
    assert not any("short break" in t for t in texts), texts  # a quoted example, no lesson
    goals = {f[0]: f[1] for f in facts if f[0].startswith("My goal is")}
    assert len(goals) == 2 and all(v == "1" for v in goals.values()), goals
    lessons = [f[0] for f in facts if f[2] == f"agent_{AGENT}"]
    assert lessons == ["confirm the time zone before booking a meeting."], lessons


async def test_passages_are_retired_and_replayed_like_any_episode(
        consolidated: Stack, client: MemoryClient) -> None:
    """The passages of one answer are one session's consecutive episodes; asking twice
    gives the same memories (nothing was written twice)."""
    rows = consolidated.sql("SELECT COUNT(*), COUNT(DISTINCT content_hash) FROM memory "
                            "WHERE source_event_ids = '[\"proj-1\"]'")
    assert int(rows[0][0]) == int(rows[0][1]) >= 3
    a = await ask(client, "How should I measure the dashboard response time?")
    await asyncio.sleep(0.2)
    b = await ask(client, "How should I measure the dashboard response time?")
    assert [m.id for m in a.memories] == [m.id for m in b.memories]
