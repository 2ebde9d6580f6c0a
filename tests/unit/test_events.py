from __future__ import annotations

import json

import pytest

from streams.domain.events import (
    MISSING_TENANT,
    SCHEMA,
    TOO_LARGE,
    UNDECODABLE,
    UNKNOWN_TYPE,
    Rejected,
    decode_chat_event,
)
from streams.records import ChatMessage, SessionEnd

BASE = {
    "event_id": "e1",
    "type": "message",
    "tenant_id": "acme",
    "user_id": "u1",
    "agent_id": "a1",
    "conversation_id": "c1",
    "role": "user",
    "content": "hello",
    "created_at": "2026-11-30T08:00:00Z",
}


def enc(**changes: object) -> bytes:
    doc = {**BASE, **changes}
    return json.dumps({k: v for k, v in doc.items() if v is not ...}).encode()


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (None, UNDECODABLE),
        (b"\xff\xfe\x00garbage", UNDECODABLE),
        (b"not json", UNDECODABLE),
        (b"[1, 2]", UNDECODABLE),
        (b'"a string"', UNDECODABLE),
        (enc(tenant_id=...), MISSING_TENANT),
        (enc(tenant_id=""), MISSING_TENANT),
        (enc(tenant_id=None), MISSING_TENANT),
        (enc(type="reaction"), UNKNOWN_TYPE),
        (enc(type=...), UNKNOWN_TYPE),
        (enc(content="x" * 65_537), TOO_LARGE),
        (enc(content="é" * 40_000), TOO_LARGE),  # 80,000 UTF-8 bytes
        (enc(role="robot"), SCHEMA),
        (enc(created_at="2026-11-30T08:00:00"), SCHEMA),  # no offset: not RFC 3339
        (enc(created_at=1764489600), SCHEMA),
        (enc(created_at="yesterday"), SCHEMA),
        (enc(event_id=""), SCHEMA),
        (enc(tenant_id="a/b"), SCHEMA),
        (enc(user_id=...), SCHEMA),
        (enc(content=42), SCHEMA),
        (enc(conversation_id="agent:helper"), SCHEMA),  # sub-agent without parent
    ],
)
def test_rejections_name_one_reason(raw: bytes | None, reason: str) -> None:
    out = decode_chat_event(raw, 65_536)
    assert isinstance(out, Rejected)
    assert out.reason == reason
    assert out.message


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (enc(), ChatMessage),
        (enc(content="x" * 65_536), ChatMessage),  # exactly at the limit
        (enc(created_at="2026-11-30T09:00:00+01:00"), ChatMessage),
        (enc(role="tool", content="42", tool_call_id="call_1"), ChatMessage),
        (
            enc(role="assistant", content="", tool_calls=[{"id": "c", "type": "function"}]),
            ChatMessage,
        ),
        (enc(conversation_id="agent:helper", parent_conversation_id="c1"), ChatMessage),
        (enc(unknown_field="ignored"), ChatMessage),
        (json.dumps({k: v for k, v in BASE.items() if k not in {"role", "content"}}
                    | {"type": "session_end"}).encode(), SessionEnd),
    ],
)
def test_valid_events_decode(raw: bytes, kind: type) -> None:
    assert isinstance(decode_chat_event(raw, 65_536), kind)


def test_limit_is_configurable() -> None:
    assert isinstance(decode_chat_event(enc(content="x" * 11), 10), Rejected)
    assert isinstance(decode_chat_event(enc(content="x" * 10), 10), ChatMessage)
