"""Nothing promoted twice: a session closed twice, its closing event redelivered,
the chat topic replayed from offset 0, Redis down during consolidation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import Stack, chat_event, session_end_event
from tests.integration.consolidation_support import (
    FAST,
    contents,
    memories,
    run_status,
    runs_open,
)
from tests.integration.test_ingest_volume import rewind_group
from tests.support.services import PrivateRedis, free_port
from tests.support.worker import eventually

SESSION = [
    chat_event(0, "c1", content="Hi! I live in Berlin. I love hiking."),
    chat_event(1, "c1", content="Berlin is lovely for that."),
    chat_event(2, "c1", content="My sister is called Ana."),
    chat_event(3, "c1", content="Noted."),
]
FACTS = ["I live in Berlin.", "I love hiking.", "My sister is called Ana."]
MORE_FACTS = ["I work as a nurse.", "I speak French.", "My brother is called Tom.",
              "I grew up in Lisbon.", "I have two cats.", "I love jazz.", "I hate mushrooms.",
              "I studied biology.", "My favourite colour is green.", "I am allergic to peanuts."]


async def test_a_session_closed_twice_or_replayed_from_zero_promotes_once(stack: Stack) -> None:
    stack.extra_env.update(FAST)
    stack.worker().start()
    await stack.produce([*SESSION, session_end_event("c1"), session_end_event("c1", n=1)])
    await eventually(lambda: run_status(stack, "t1/c1#1") == "done", 60, "the session consolidated")
    assert contents(stack) == FACTS
    assert len(contents(stack, "episode")) == 4
    before = memories(stack)

    # the closing event delivered again, and another closing event over the same messages
    (closed,) = await stack.read_topic(stack.topics["closed"], expect=1)
    doc = json.loads(closed.value)
    other = {**doc, "closed_id": "t1/c1#7", "session_seq": 7}
    await stack.produce([closed.value, json.dumps(other).encode()], topic=stack.topics["closed"],
                        keys=[b"c1", b"c1"])
    await eventually(lambda: run_status(stack, "t1/c1#7") == "done", 60, "the second event")
    await eventually(lambda: stack.group_caught_up(stack.name, [stack.topics["closed"]]), 60,
                     "the redelivery consumed")
    stack.workers[-1].stop()
    assert memories(stack) == before

    # replay 1: the same consumer group rewound to offset 0 on the chat and closed topics
    await rewind_group(stack.name, stack.topics["chat"])
    await rewind_group(stack.name, stack.topics["closed"])
    stack.worker().start()
    await eventually(lambda: stack.group_caught_up(
        stack.name, [stack.topics["chat"], stack.topics["closed"]]), 60, "the rewound group")
    stack.workers[-1].stop()
    assert memories(stack) == before
    # replay 2: a new consumer group (empty session table) reads every topic again,
    # re-closes the session and sees every closing event a second time
    fresh = f"{stack.name}-replay"
    stack.worker(app_id=fresh).start()
    await eventually(lambda: stack.group_caught_up(
        fresh, [stack.topics["chat"], stack.topics["closed"]]), 90, "the new group")
    await eventually(lambda: runs_open(stack) == 0, 30, "every run done")
    stack.workers[-1].stop()
    assert memories(stack) == before


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    r = PrivateRedis(free_port(), tmp_path / "redis")
    r.start()
    yield r
    r.stop()


async def test_redis_down_during_consolidation_no_duplicates(
    stack: Stack, private_redis: PrivateRedis
) -> None:
    stack.redis_url = private_redis.url
    stack.extra_env.update(FAST)
    stack.worker().start()
    await stack.produce([*SESSION, session_end_event("c1")])
    await eventually(lambda: run_status(stack, "t1/c1#1") == "done", 60, "session 1")
    (closed,) = await stack.read_topic(stack.topics["closed"], expect=1)

    private_redis.stop()
    more = [chat_event(i, "c1", content=MORE_FACTS[(i - 4) // 2] if i % 2 == 0 else "Nice.")
            for i in range(4, 24)]
    await stack.produce([*more, session_end_event("c1", n=1)])
    await stack.produce([closed.value], topic=stack.topics["closed"], keys=[b"c1"])  # again
    await eventually(lambda: run_status(stack, "t1/c1#2") == "done", 60, "session 2, Redis down")
    await eventually(lambda: stack.group_caught_up(stack.name, [stack.topics["closed"]]), 60,
                     "the redelivered event consumed")
    facts = contents(stack)
    assert len(facts) == len(set(facts)) and sorted(facts) == sorted(FACTS + MORE_FACTS)
    # one episode per message: 24 messages, each once
    (total, distinct), = stack.sql("SELECT COUNT(*), COUNT(DISTINCT source_event_ids) "
                                   "FROM memory WHERE kind = 'episode'")
    assert total == distinct == "24"
    # the summary (24 uncovered messages) is in MySQL although Redis was down
    (row,) = stack.sql("SELECT covered_count, summary FROM conversation_summary")
    assert row[0] == "24" and "user: I work as a nurse." in row[1]
