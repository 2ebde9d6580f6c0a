"""The chat event contract against one real worker: dead letters, tenants,
sub-agents, the Session read path and the history command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from streams.adapters.redis.conversation_cache import ConversationCache
from streams.wire.headers import header
from tests.integration.conftest import Stack, chat_event, session_end_event, session_reader
from tests.support.worker import ROOT, eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

BAD: list[tuple[bytes, str]] = [
    (b"\xff\xfe not utf-8", "undecodable"),
    (b"{not json", "undecodable"),
    (json.dumps({k: v for k, v in chat_event(0, "bad").items() if k != "tenant_id"}).encode(),
     "missing_tenant"),
    (json.dumps(chat_event(0, "bad", type="reaction")).encode(), "unknown_type"),
    (json.dumps(chat_event(0, "bad", content="x" * 70_000)).encode(), "too_large"),
    (json.dumps(chat_event(0, "bad", role="robot")).encode(), "schema"),
    (json.dumps(chat_event(0, "bad", created_at="last tuesday")).encode(), "bad_time"),
    # an id a store or provider would trim: refused at the door, never stuck later
    (json.dumps(chat_event(0, "bad", user_id="alice ")).encode(), "bad_id"),
    (json.dumps(session_end_event("bad", user_id="alice ")).encode(), "bad_id"),
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def running(shared_stack: Stack) -> AsyncIterator[Stack]:
    s = shared_stack
    worker = s.worker().start()
    good_before = [chat_event(i, "dlq-conv") for i in range(2)]
    good_after = [chat_event(i, "dlq-conv") for i in range(2, 4)]
    await s.produce([*good_before, *(b for b, _ in BAD), *good_after],
                    keys=[b"dlq-conv"] * (len(BAD) + 4))
    # the same conversation id under two tenants
    await s.produce([chat_event(i, "shared", tenant="tenant-a", content=f"A secret {i}")
                     for i in range(3)]
                    + [chat_event(i, "shared", tenant="tenant-b", content=f"B note {i}")
                       for i in range(2)])
    # a sub-agent working for conversation "parent"
    sub = {"conversation_id": "agent:parent:search", "parent_conversation_id": "parent"}
    await s.produce([
        chat_event(0, "parent", content="find me a flight"),
        chat_event(1, "sub", **sub, role="system", content="you search flights"),
        chat_event(2, "sub", **sub, role="assistant", content="", tool_calls=[{"id": "c1"}]),
        chat_event(3, "sub", **sub, role="tool", content='{"flights": 3}', tool_call_id="c1"),
        chat_event(4, "sub", **sub, role="assistant", content="there are 3 flights on Friday"),
        chat_event(5, "parent", content="book the first", role="user"),
        session_end_event("parent"),
    ])
    await eventually(lambda: s.sql("SELECT COUNT(*) FROM conversation_message")[0][0] == "12",
                     90, "all good events stored")
    yield s
    worker.stop()


async def test_each_bad_input_is_dead_lettered_with_its_reason(running: Stack) -> None:
    dead = await running.read_topic(running.topics["dlq"], expect=len(BAD))
    assert len(dead) == len(BAD)
    by_value = {m.value: m for m in dead}
    for raw, reason in BAD:
        m = by_value[raw]
        assert header(m.headers, "memstream.error.reason") == reason.encode()
        assert m.key == b"dlq-conv"
        assert header(m.headers, "memstream.source.topic") == running.topics["chat"].encode()
        assert header(m.headers, "memstream.source.partition") is not None
        assert int(header(m.headers, "memstream.source.offset") or b"-1") >= 2
        assert header(m.headers, "memstream.error.class")
        assert header(m.headers, "memstream.error.message")


async def test_events_after_bad_input_are_processed(running: Stack) -> None:
    rows = running.sql("SELECT event_id FROM conversation_message "
                       "WHERE conversation_id = 'dlq-conv' ORDER BY id")
    assert [r[0] for r in rows] == [f"t1-dlq-conv-{i}" for i in range(4)]


async def test_dead_letters_are_counted_by_reason(running: Stack) -> None:
    port = running.workers[0].env["MEMSTREAM_WEB__PORT"]
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    counts = {}
    for line in body.splitlines():
        if line.startswith("memstream_dead_letters_total{"):
            labels, value = line.rsplit(" ", 1)
            counts[labels] = float(value)
    assert counts['memstream_dead_letters_total{reason="undecodable",stage="ingest"}'] == 2
    for reason in ("missing_tenant", "unknown_type", "too_large", "schema", "bad_time"):
        assert counts[f'memstream_dead_letters_total{{reason="{reason}",stage="ingest"}}'] == 1
    assert counts['memstream_dead_letters_total{reason="bad_id",stage="ingest"}'] == 2


async def test_same_conversation_id_under_two_tenants_stays_two(running: Stack) -> None:
    async with session_reader(running) as reader:
        a = await reader.window("tenant-a", "shared")
        b = await reader.window("tenant-b", "shared")
        nobody = await reader.window("tenant-c", "shared")
    assert [m["content"] for m in a.messages] == ["A secret 0", "A secret 1", "A secret 2"]
    assert [m["content"] for m in b.messages] == ["B note 0", "B note 1"]
    assert nobody.messages == []
    names = ConversationCache(None, prefix=running.name)
    keys = sorted(k.decode() for k in await running.redis().keys(f"{running.name}:*shared*:hist"))
    assert keys == sorted(
        [names.list_key("tenant-a", "shared"), names.list_key("tenant-b", "shared")]
    )


async def test_subagent_chat_reaches_the_parent_and_nothing_else_does(running: Stack) -> None:
    rows = running.sql("SELECT conversation_id, role, content, COALESCE(origin_conversation_id,'') "
                       "FROM conversation_message WHERE tenant_id='t1' AND "
                       "conversation_id IN ('parent', 'agent:parent:search') ORDER BY id")
    assert [r[:3] for r in rows if r[1] == "assistant"] == [
        ["parent", "assistant", "there are 3 flights on Friday"]]
    assert {r[0] for r in rows} == {"parent"}
    assert [r[3] for r in rows if r[1] == "assistant"] == ["agent:parent:search"]


async def test_session_end_is_handed_on(running: Stack) -> None:
    records = await running.read_topic(running.topics["closed"], expect=1)
    assert len(records) == 1, [(r.partition, r.offset, r.value) for r in records]
    (closed,) = records
    doc = json.loads(closed.value)
    assert closed.key == b"parent"
    assert (doc["tenant_id"], doc["conversation_id"], doc["trigger"]) == (
        "t1", "parent", "explicit"
    )


def run_history(stack: Stack, *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "streams.cli", "history", *args],
        env={**os.environ, **stack.env()}, cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


async def test_history_command_returns_the_window(running: Stack) -> None:
    w = run_history(running, "shared", "--tenant", "tenant-a", "--last-n", "2")
    # the newest two are assistant "A secret 1" and user "A secret 2": a window never
    # starts with an assistant turn
    assert [m["content"] for m in w["messages"]] == ["A secret 2"]
    full = run_history(running, "shared", "--tenant", "tenant-a")
    assert [m["content"] for m in full["messages"]] == ["A secret 0", "A secret 1", "A secret 2"]
    tiny = run_history(running, "shared", "--tenant", "tenant-a", "--max-tokens", "8")
    assert [m["content"] for m in tiny["messages"]] == ["A secret 2"] and tiny["truncated"]


async def test_history_command_rejects_bad_arguments(running: Stack) -> None:
    for args in (["c", "--tenant", "bad/tenant"], ["c", "--tenant", "t", "--last-n", "0"]):
        out = subprocess.run([sys.executable, "-m", "streams.cli", "history", *args],
                             env={**os.environ, **running.env()}, cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and "error" in out.stderr
