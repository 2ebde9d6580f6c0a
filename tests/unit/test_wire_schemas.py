"""The JSON Schemas in schemas/ are the contract for producers in any language:
they must be current and agree with what the worker accepts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker

from streams.wire.decode import Rejected, decode_chat_event
from streams.wire.query import MemoryQuery
from streams.wire.schemas import all_schemas

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
BASE: dict[str, Any] = {
    "event_id": "e1", "type": "message", "tenant_id": "acme", "user_id": "u1", "agent_id": "a1",
    "conversation_id": "c1", "role": "user", "content": "hello",
    "created_at": "2026-11-30T08:00:00Z",
}


@pytest.mark.parametrize("name", sorted(all_schemas()))
def test_committed_schema_is_current(name: str) -> None:
    committed = json.loads((SCHEMAS / name).read_text())
    assert committed == all_schemas()[name], "run `memstream schemas export`"


@pytest.mark.parametrize("name", sorted(all_schemas()))
def test_schema_is_valid_2020_12(name: str) -> None:
    Draft202012Validator.check_schema(json.loads((SCHEMAS / name).read_text()))


def _drop(doc: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in keys}


CASES: list[dict[str, Any]] = [
    BASE,
    BASE | {"role": "robot"},
    BASE | {"created_at": "2026-11-30 08:00"},
    BASE | {"event_id": ""},
    BASE | {"tenant_id": "a/b"},
    _drop(BASE, "user_id"),
    _drop(BASE, "content"),
    BASE | {"content": 5},
    BASE | {"name": "Ann", "tool_calls": [{"id": "c1"}], "tool_call_id": "c0"},
    BASE | {"conversation_id": "agent:x"},
    BASE | {"conversation_id": "agent:x", "parent_conversation_id": "c1"},
    _drop(BASE, "role", "content") | {"type": "session_end"},
    _drop(BASE, "role", "content") | {"type": "session_end", "reason": "user left"},
    BASE | {"type": "session_end", "reason": 3},
    BASE | {"extra": True},
]


@pytest.mark.parametrize("doc", CASES, ids=range(len(CASES)))
def test_schema_and_decoder_agree(doc: dict[str, Any]) -> None:
    schema = json.loads((SCHEMAS / "chat-message.schema.json").read_text())
    validator = Draft202012Validator(schema, format_checker=FormatChecker())
    schema_ok = validator.is_valid(doc)
    decoded = decode_chat_event(json.dumps(doc).encode(), 65_536)
    assert schema_ok == (not isinstance(decoded, Rejected)), decoded


JACKSON_QUERY = {  # a Java record with unset fields, as Jackson writes it by default
    "request_id": None, "tenant_id": "t", "user_id": "u", "agent_id": "a",
    "conversation_id": None, "message": "hi", "context": None,
    "options": {"top_k": None, "just_keyword_search": None, "include_short_term": None,
                "last_n": None, "long_memory_token_budget": None, "timeout_ms": None},
}


@pytest.mark.parametrize(("doc", "valid"), [
    (JACKSON_QUERY, True),
    ({**JACKSON_QUERY, "options": None}, True),
    ({**JACKSON_QUERY, "message": None}, False),  # required: null is not "given"
    ({**JACKSON_QUERY, "options": {"top_k": 0}}, False),
])
def test_the_query_schema_accepts_what_the_worker_accepts(doc: dict[str, Any],
                                                          valid: bool) -> None:
    schema = json.loads((SCHEMAS / "memory-query.schema.json").read_text())
    errors = list(Draft202012Validator(schema, format_checker=FormatChecker()).iter_errors(doc))
    assert (not errors) is valid
    try:
        MemoryQuery.model_validate(doc)
        accepted = True
    except ValueError:
        accepted = False
    assert accepted is valid
