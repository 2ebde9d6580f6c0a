"""Poison never stops the stream, against one real worker: each poison record,
published between good events (or written straight to an internal topic), is
dead-lettered exactly once with its original bytes and its reason, the good
events around it are stored, and later traffic keeps flowing."""

from __future__ import annotations

import json
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from streams.client import MemoryClient
from streams.wire.headers import ATTEMPT, NEXT_ATTEMPT_AT, header
from tests.integration.conftest import Stack, chat_event
from tests.support.services import KAFKA_BOOTSTRAP
from tests.support.worker import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

CONV = "poison-conv"
DEEP = b"[" * 1200 + b"]" * 1200


def chat(i: int, **kw: Any) -> bytes:
    return json.dumps(chat_event(i, CONV, **kw)).encode()


def raw_field(i: int, field: str, json_text: bytes) -> bytes:
    return chat(i, **{field: "@@RAW@@"}).replace(b'"@@RAW@@"', json_text)


# poison on chat.messages (stage ingest): value -> reason
CHAT_POISON: dict[bytes, str] = {
    raw_field(100, "content", rb'"x\ud800"'): "invalid_text",
    chat(101, role="assistant", tool_calls=[{"id": "c1", "arguments": "x" * 70_000}]):
        "too_large",
    raw_field(102, "tool_calls", DEEP): "too_deep",
    chat(103, created_at="9999-12-31T23:59:59-01:00"): "out_of_range",
    # valid, but the (narrowed) name column cannot hold it: the database refuses the row
    chat(104, name="a-speaker-name-longer-than-eight"): "unstorable",
}
CLOSED = {"closed_id": "t1/c9#1", "tenant_id": "t1", "user_id": "u1", "agent_id": "a1",
          "conversation_id": "c9", "trigger": "idle", "session_seq": 1,
          "closed_at": "2026-11-30T09:00:00Z", "last_activity": "2026-11-30T08:00:00Z",
          "message_count": 1}
IDLE = {"tenant_id": "t1", "conversation_id": CONV, "session_seq": 1, "idle_for_s": 1.0,
        "checked_at": "2026-11-30T09:00:00Z"}
# written straight to an internal topic: (topic key, value, headers) -> (stage, reason)
INTERNAL: list[tuple[str, bytes, list[tuple[str, bytes]], str, str]] = [
    ("subagent", json.dumps({k: v for k, v in chat_event(200, CONV).items()
                             if k not in {"role", "content"}} | {"type": "session_end"}).encode(),
     [], "ingest", "schema"),
    ("subagent", chat(201), [], "ingest", "schema"),  # not sub-agent chat
    ("idle", b"\x00\xffnot json", [], "ingest", "undecodable"),
    ("idle", b'{"tenant_id": "t1", "conversation_id": ' + DEEP + b"}", [], "ingest", "too_deep"),
    ("idle", json.dumps(IDLE | {"checked_at": "9999-12-31T23:59:59-01:00"}).encode(), [],
     "ingest", "out_of_range"),
    ("closed", b"{not json", [], "consolidation", "undecodable"),
    ("closed", json.dumps(CLOSED | {"closed_at": "9999-12-31T23:59:59-01:00"}).encode(), [],
     "consolidation", "out_of_range"),
    ("retry", b"\x00 not a closing event", [(NEXT_ATTEMPT_AT, b"9999-12-31T23:59:59+00:00"),
                                            (ATTEMPT, b"\xff")], "consolidation", "undecodable"),
    ("queries", b'{"tenant_id": "t1"}', [("kafka_replyTopic", b"no such topic!"),
                                         ("kafka_correlationId", b"c")], "query",
     "bad_reply_headers"),
]
GOOD = list(range(6))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def running(shared_stack: Stack) -> AsyncIterator[Stack]:
    s = shared_stack
    s.extra_env.update({
        # the retry scheduler waits at most the longest backoff, whatever a record says
        "MEMSTREAM_CONSOLIDATION__RETRY_BACKOFF_INITIAL_S": "1",
        "MEMSTREAM_CONSOLIDATION__RETRY_BACKOFF_MAX_S": "2",
    })
    worker = s.worker().start()
    # a schema narrower than the model (an old or hand-altered database)
    s.sql("ALTER TABLE conversation_message MODIFY name VARCHAR(8) NULL")
    poison = list(CHAT_POISON)
    values = [chat(GOOD[0])]
    for n, bad in enumerate(poison):
        values += [bad, chat(GOOD[n + 1])]
    await s.produce(values, keys=[CONV.encode()] * len(values))
    for topic, value, headers, _, _ in INTERNAL:
        await s.produce([value], topic=s.topics[topic], keys=[CONV.encode()], headers=[headers])
    yield s
    worker.stop()


def stored_ids(stack: Stack) -> list[str]:
    return [r[0] for r in stack.sql(
        f"SELECT event_id FROM conversation_message WHERE conversation_id = '{CONV}' ORDER BY id")]


async def dead_letters(stack: Stack) -> list[Any]:
    expected = len(CHAT_POISON) + len(INTERNAL)

    async def all_there() -> bool:
        return len(await stack.read_topic(stack.topics["dlq"], timeout=5)) >= expected

    await eventually(all_there, 90, "every poison record in the dead-letter topic")
    return await stack.read_topic(stack.topics["dlq"], expect=expected)


async def test_good_events_around_chat_poison_are_stored(running: Stack) -> None:
    want = [f"t1-{CONV}-{i}" for i in GOOD]
    await eventually(lambda: stored_ids(running) == want, 90, "the good events stored")


async def test_each_poison_is_dead_lettered_once_with_its_bytes_and_reason(
    running: Stack,
) -> None:
    dead = await dead_letters(running)
    counts = Counter(m.value for m in dead)
    assert len(dead) == len(CHAT_POISON) + len(INTERNAL)
    for value, reason in CHAT_POISON.items():
        assert counts[value] == 1, reason
        (m,) = [m for m in dead if m.value == value]
        assert m.key == CONV.encode()
        assert header(m.headers, "memstream.error.reason") == reason.encode()
        assert header(m.headers, "memstream.stage") == b"ingest"
        assert header(m.headers, "memstream.source.topic") == running.topics["chat"].encode()
        message = header(m.headers, "memstream.error.message") or b""
        assert b"INSERT" not in message and b"speaker" not in message  # short, no contents
    for topic, value, _, stage, reason in INTERNAL:
        assert counts[value] == 1, (topic, reason)
        (m,) = [m for m in dead if m.value == value]
        assert header(m.headers, "memstream.error.reason") == reason.encode(), topic
        assert header(m.headers, "memstream.stage") == stage.encode(), topic
        assert header(m.headers, "memstream.source.topic") == running.topics[topic].encode()


async def test_the_refused_row_is_counted(running: Stack) -> None:
    await dead_letters(running)
    port = running.workers[0].env["MEMSTREAM_WEB__PORT"]
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    counts = {}
    for line in body.splitlines():
        if line.startswith("memstream_") and "{" in line:
            labels, value = line.rsplit(" ", 1)
            counts[labels] = float(value)
    assert counts['memstream_dead_letters_total{reason="unstorable",stage="ingest"}'] == 1
    assert counts['memstream_sink_failures_total{error="DataError",sink="mysql"}'] >= 1


async def test_later_traffic_keeps_flowing(running: Stack) -> None:
    await dead_letters(running)
    later = [chat_event(i, CONV) for i in (10, 11)] + [chat_event(0, "another-conv")]
    await running.produce(later)
    await eventually(lambda: stored_ids(running)[-2:] == [f"t1-{CONV}-10", f"t1-{CONV}-11"],
                     60, "later events stored")
    await eventually(lambda: running.sql(
        "SELECT COUNT(*) FROM conversation_message WHERE conversation_id = 'another-conv'"
    ) == [["1"]], 60, "another conversation stored")


async def test_a_query_the_worker_cannot_read_gets_an_error_reply_and_the_next_an_answer(
    running: Stack,
) -> None:
    async with MemoryClient(KAFKA_BOOTSTRAP, request_topic=running.topics["queries"],
                            reply_topic=f"{running.name}.replies", timeout_s=30) as client:
        for body in (b'{"tenant_id": "t1", "message": ' + DEEP + b"}",
                     b'{"tenant_id": "t1", "user_id": "u\\ud800", "agent_id": "a1", '
                     b'"message": "hi"}'):
            bad = await client.send_raw(body, key=b"t1/u1")
            assert bad.error is not None and bad.error.code == "bad_request"
        good = await client.query(tenant_id="t1", user_id="u1", agent_id="a1",
                                  conversation_id=CONV, message="what did I say?")
        assert good.error is None and good.short_term is not None
        assert good.short_term["messages"]
