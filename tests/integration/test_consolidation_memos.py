"""Agents routed to MemOS by their configuration; compensation when MemOS fails:
retries, the retry topic, the dead-letter topic and `memstream replay`."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator

import pytest

from streams.wire.headers import header
from tests.fakes.memos import FakeMemOS
from tests.integration.conftest import Stack, chat_event, session_end_event
from tests.integration.consolidation_support import (
    FAST,
    memstream,
    run_status,
    set_agent,
)
from tests.support.worker import eventually

SESSION = [chat_event(0, "c1", content="I live in Oslo. I love skiing."),
           chat_event(1, "c1", content="Oslo is great for that."),
           chat_event(2, "c1", content="My dog is called Rex.")]
FACTS = ["I live in Oslo.", "I love skiing.", "My dog is called Rex."]
ADD = "/product/add"


@pytest.fixture
def memos() -> Iterator[FakeMemOS]:
    with FakeMemOS() as server:
        yield server


def memos_facts(memos: FakeMemOS, tenant: str = "t1") -> list[str]:
    return sorted(m["memory"] for m in memos.memories()
                  if m["cube_id"].startswith(f"{tenant}:"))


def configure(stack: Stack, memos: FakeMemOS, *agents: str) -> None:
    stack.extra_env.update(FAST)
    stack.extra_env["MEMSTREAM_MEMOS__BASE_URL"] = memos.url
    for agent in agents:
        doc = set_agent(stack, "t1", agent, "--provider", "MEMOS", "--open-long-memory", "on",
                        "--model", "chat-model")
        assert (doc["route"], doc["long_memory"]) == ("memos", True)


async def test_memos_failing_three_times_then_recovering_stores_each_memory_once(
    stack: Stack, memos: FakeMemOS
) -> None:
    configure(stack, memos, "a1")
    stack.worker().start()
    memos.fail_next(3, status=503, path=ADD)  # 2 in-process attempts, then the retry topic
    await stack.produce([*SESSION, session_end_event("c1")])
    await eventually(lambda: run_status(stack, "t1/c1#1") == "done", 60, "the retried session")
    assert memos_facts(memos) == FACTS
    assert memos.count(ADD) == 3 + len(FACTS)
    retries = await stack.read_topic(stack.topics["retry"], expect=1)
    assert [header(r.headers, "memstream.attempt") for r in retries] == [b"2"]
    assert header(retries[0].headers, "memstream.retry.reason") == b"provider_unavailable"
    assert await stack.read_topic(stack.topics["dlq"]) == []
    # nothing went to the built-in provider instead
    assert stack.sql("SELECT COUNT(*) FROM memory")[0][0] == "0"

    # a configuration set while the worker runs reaches it through the global table
    configure(stack, memos, "a2")
    got = json.loads(memstream(stack, "agent-config", "get", "--tenant", "t1").stdout)
    assert sorted(d["agent_id"] for d in got) == ["a1", "a2"]
    await stack.produce([chat_event(0, "c2", agent_id="a2", content="I speak Greek."),
                         session_end_event("c2", agent_id="a2")])
    await eventually(lambda: run_status(stack, "t1/c2#1") == "done", 60, "agent a2's session")
    assert "I speak Greek." in memos_facts(memos)


async def test_memos_down_for_good_dead_letters_and_replay_brings_it_through(
    stack: Stack, memos: FakeMemOS
) -> None:
    configure(stack, memos, "a1")
    stack.worker().start()
    memos.fail_always(status=502, path=ADD)
    await stack.produce([*SESSION, session_end_event("c1")])
    (dead,) = await stack.read_topic(stack.topics["dlq"], expect=1, timeout=60)
    assert header(dead.headers, "memstream.stage") == b"consolidation"
    assert header(dead.headers, "memstream.error.reason") == b"retries_exhausted"
    assert header(dead.headers, "memstream.source.topic") == stack.topics["closed"].encode()
    assert header(dead.headers, "memstream.attempt") == b"3"
    assert len(await stack.read_topic(stack.topics["retry"], expect=2)) == 2
    assert memos_facts(memos) == []

    memos.recover()
    dlq = ["replay", "--from", stack.topics["dlq"]]
    out = memstream(stack, *dlq)
    assert json.loads(out.stdout)["redriven"] == 1
    assert "re-driven" in out.stderr  # the progress bar
    await eventually(lambda: run_status(stack, "t1/c1#1") == "done", 60, "the replayed session")
    assert memos_facts(memos) == FACTS

    # again: the replay group remembers; from the start: downstream stores nothing twice
    assert json.loads(memstream(stack, *dlq).stdout)["redriven"] == 0
    assert json.loads(memstream(stack, *dlq, "--restart").stdout)["redriven"] == 1
    await eventually(lambda: stack.group_caught_up(stack.name, [stack.topics["closed"]]), 60,
                     "the second replay consumed")
    assert Counter(memos_facts(memos)) == Counter(FACTS)

    # ingest dead letters go back to the chat topic the same way (here: one that a
    # since-relaxed rule had refused), filtered by tenant
    fixed = chat_event(9, "c9", tenant="t2", content="I was refused once.")
    headers = [("memstream.stage", b"ingest"), ("memstream.error.reason", b"schema"),
               ("memstream.source.topic", stack.topics["chat"].encode()),
               ("memstream.failed_at", b"2026-11-30T09:00:00+00:00")]
    await stack.produce([fixed], topic=stack.topics["dlq"], headers=[headers])
    report = json.loads(memstream(stack, *dlq, "--tenant", "t2").stdout)
    assert report["redriven"] == 1 and report["skipped"] == {"other_tenant": 1}
    await eventually(lambda: stack.sql(
        "SELECT COUNT(*) FROM conversation_message WHERE tenant_id = 't2'")[0][0] == "1",
        30, "the re-driven chat message stored")
