"""Requests as a Spring / Jackson client writes them: ``null`` for every unset
field, fields this version does not know; replies carry a content type."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streams.query.processor import QueryProcessor
from streams.testing.query import EchoLookup
from streams.wire.envelope import SourceRecord, ToSend
from streams.wire.headers import header
from streams.wire.query import MemoryQuery, MemoryReply
from streams.wire.spring_reply import request_headers
from tests.agents.test_query_answering import NOW

BASE = {"tenant_id": "t", "user_id": "u", "agent_id": "a", "message": "hi"}


async def answer(doc: dict[str, Any]) -> tuple[MemoryReply, Any, EchoLookup]:
    engine = EchoLookup()
    processor = QueryProcessor(engine, "dlq", clock=lambda: NOW)
    rec = SourceRecord("q", 0, 0, b"t/u", json.dumps(doc).encode(),
                       request_headers("replies", b"cid"), timestamp=NOW)
    out = await processor.handle(rec)
    assert isinstance(out, ToSend)
    [reply] = out.records
    return MemoryReply.model_validate_json(reply.value or b""), reply, engine


@pytest.mark.parametrize("doc", [
    {**BASE, "options": None},
    {**BASE, "request_id": None, "conversation_id": None, "context": None},
    {**BASE, "options": {"top_k": None, "last_n": None, "timeout_ms": None,
                         "include_short_term": None, "just_keyword_search": None,
                         "long_memory_token_budget": None}},
], ids=["options-null", "top-level-nulls", "nulls-inside-options"])
async def test_null_stands_for_not_given(doc: dict[str, Any]) -> None:
    reply, _, engine = await answer(doc)
    assert reply.error is None and reply.warnings == []
    (asked,) = engine.asked
    assert asked.options == MemoryQuery.model_validate(BASE).options


async def test_a_required_field_sent_as_null_is_a_bad_request() -> None:
    reply, _, engine = await answer({**BASE, "message": None})
    assert reply.error is not None and reply.error.code == "bad_request"
    assert "message" in reply.error.message and engine.asked == []


async def test_unknown_fields_are_ignored_alike_at_every_level_and_named() -> None:
    reply, _, engine = await answer({**BASE, "locale": "nl", "options": {"top_K": 3,
                                                                         "top_k": 2}})
    assert reply.error is None
    assert engine.asked[0].options.top_k == 2
    assert [(w.code, w.message) for w in reply.warnings] == [
        ("unknown_fields", "ignored: locale, options.top_K")]


async def test_a_reply_says_it_is_json() -> None:
    _, out, _ = await answer(BASE)
    assert header(out.headers, "contentType") == b"application/json"
    assert header(out.headers, "kafka_correlationId") == b"cid"
