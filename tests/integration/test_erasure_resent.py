"""Erasure against what comes after it, on a worker over Kafka, MariaDB and Redis: a
group chat's session end sent by the erased user still closes the session, and the
users left get their memories from it (none of the erased user's); an event the
erasure deleted, dated after its cutoff (a producer whose clock runs ahead), is not
stored again when an upstream sends it again."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.integration.conftest import Stack, chat_event, session_end_event
from tests.integration.consolidation_support import FAST, contents, run_status
from tests.integration.erasure_support import erase, redis_keys, subject_rows
from tests.support.worker import eventually

QUIET = {**FAST, "MEMSTREAM_CONSOLIDATION__IDLE_TIMEOUT_S": "600"}  # no inactivity close


def at(delta_s: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=delta_s)).isoformat().replace("+00:00", "Z")


def said(conv: str, user: str, i: int, content: str, role: str = "user",
         **kw: Any) -> dict[str, Any]:
    return chat_event(i, conv, user_id=user, role=role, content=content, **kw)


async def test_an_erased_users_session_end_closes_the_group_chat_for_the_others(
        stack: Stack) -> None:
    stack.extra_env.update(QUIET)
    stack.worker().start()
    await stack.produce([
        said("c-g4", "alice", 0, "I live in Oslo.", created_at=at(-300)),
        said("c-g4", "alice", 1, "Noted, Oslo.", "assistant", created_at=at(-299)),
        said("c-g4", "bob", 2, "I live in Rome.", created_at=at(-298)),
        said("c-g4", "bob", 3, "Noted, Rome.", "assistant", created_at=at(-297))])
    await eventually(lambda: stack.sql("SELECT COUNT(*) FROM conversation_message")[0][0]
                     == "4", 60, "the group chat stored")

    receipt = erase(stack, "--tenant", "t1", "--user", "alice")
    assert receipt["status"] == "done" and receipt["counts"]["conversation_message"] == 2

    # alice's end, dated before the erasure: it covers the end, which still closes
    await stack.produce([session_end_event("c-g4", user_id="alice", agent_id="a-alice",
                                           created_at=at(-60))])
    await eventually(lambda: run_status(stack, "t1/c-g4#1") == "done", 60,
                     "bob's session consolidated by alice's end, not by inactivity")
    assert stack.sql("SELECT user_id FROM consolidation_run")[0] == ["bob"]
    assert "I live in Rome." in contents(stack, tenant="t1")
    held = " ".join(r[0] for r in stack.sql("SELECT content FROM memory"))
    assert "Oslo" not in held and "Rome" in held
    assert subject_rows(stack, "t1", user="alice") == {}
    closing = [json.loads(r.value) for r in await stack.read_topic(stack.topics["closed"])]
    assert closing and all(doc["user_id"] == "bob" and doc["agent_id"] == "a1"
                           for doc in closing), closing


async def test_an_erased_event_dated_ahead_is_not_stored_again_when_re_sent(
        stack: Stack) -> None:
    stack.extra_env.update(QUIET)
    stack.worker().start()
    ahead = said("c1", "u1", 0, "My PIN is 4711.", created_at=at(900))  # clock 15 min ahead
    await stack.produce([said("c1", "u1", 1, "Hello.", created_at=at(-10)), ahead])
    await eventually(lambda: stack.sql("SELECT COUNT(*) FROM conversation_message")[0][0]
                     == "2", 60, "both stored")

    receipt = erase(stack, "--tenant", "t1", "--user", "u1")
    assert receipt["status"] == "done" and receipt["counts"]["conversation_message"] == 2

    # the upstream sends it again, then the user says something new
    new = said("c1", "u1", 2, "A new day.", created_at=at(960))
    await stack.produce([ahead, new])
    await eventually(lambda: stack.sql("SELECT COUNT(*) FROM conversation_message WHERE "
                                       f"event_id = '{new['event_id']}'")[0][0] == "1",
                     60, "the new message stored")
    assert [r[0] for r in stack.sql("SELECT content FROM conversation_message")] == [
        "A new day."]
    # remembered: the one message the erasure deleted that its cutoff does not cover
    assert stack.sql("SELECT event_id FROM erased_event") == [[ahead["event_id"]]]
    r = stack.redis()
    try:
        for key in await redis_keys(stack, "t1", "c1"):
            if key.endswith(":hist"):
                cached = " ".join(v.decode() for v in await r.lrange(key, 0, -1))
                assert "4711" not in cached, cached
    finally:
        await r.aclose()
