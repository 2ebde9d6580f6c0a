from __future__ import annotations

import json
from datetime import UTC

import pytest

from streams.wire.decode import (
    BAD_ID,
    BAD_TIME,
    INVALID_TEXT,
    MISSING_TENANT,
    OUT_OF_RANGE,
    REASONS,
    SCHEMA,
    TOO_DEEP,
    TOO_LARGE,
    UNDECODABLE,
    UNKNOWN_TYPE,
    Rejected,
    decode_chat_event,
    decode_record,
)
from streams.wire.records import ChatMessage, IdleCheck, SessionClosed, SessionEnd

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


def nested(depth: int) -> str:
    """JSON text of ``depth`` nested arrays (built as text: json.dumps would recurse)."""
    return "[" * depth + "]" * depth


def with_raw(field: str, json_text: str) -> bytes:
    """BASE with ``field`` set to raw JSON text (for values json.dumps cannot write)."""
    return enc(**{field: "@@RAW@@"}).replace(b'"@@RAW@@"', json_text.encode())


def tool_calls_of(size: int) -> list[dict[str, str]]:
    """tool_calls whose stored JSON is exactly ``size`` bytes."""
    frame = len(json.dumps([{"a": ""}]))
    return [{"a": "x" * (size - frame)}]


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
        (enc(created_at="2026-11-30T08:00:00"), BAD_TIME),  # no offset: when was that?
        (enc(created_at="yesterday"), BAD_TIME),
        (enc(created_at=True), BAD_TIME),
        (enc(created_at=[2026, 11, 30]), BAD_TIME),  # Jackson's LocalDateTime array: no offset
        (enc(created_at=1e300), OUT_OF_RANGE),
        (enc(created_at=10**400), OUT_OF_RANGE),  # an int no float holds
        (enc(created_at=-(10**400)), OUT_OF_RANGE),
        (enc(created_at="2026-11-30T09:00Z\n"), BAD_TIME),  # the whole string, not a prefix
        (enc(created_at="2026-11-30T09:00:00Z\n"), BAD_TIME),
        (enc(event_id=""), SCHEMA),
        (enc(tenant_id="a/b"), SCHEMA),
        (enc(user_id=...), SCHEMA),
        (enc(content=42), SCHEMA),
        (enc(conversation_id="agent:helper"), SCHEMA),  # sub-agent without parent
        # what no sink can take
        ("\ufeff".encode() + enc(), UNDECODABLE),  # a byte-order mark is not JSON
        (enc().decode().encode("utf-16"), UNDECODABLE),  # JSON, but not UTF-8
        (with_raw("content", "NaN"), UNDECODABLE),
        (with_raw("tool_calls", '[{"n": Infinity}]'), UNDECODABLE),
        (with_raw("tool_calls", '[{"n": 1e999}]'), UNDECODABLE),  # overflows a double
        (with_raw("tool_calls", '[{"n": ' + "9" * 5000 + "}]"), UNDECODABLE),
        (with_raw("tool_calls", nested(1200)), TOO_DEEP),  # Python's parser gives up
        (with_raw("tool_calls", nested(64)), TOO_DEEP),  # the explicit limit
        (with_raw("extra", nested(100)), TOO_DEEP),  # ignored fields too
        (with_raw("content", r'"x\ud800"'), INVALID_TEXT),
        (with_raw("content", r'"\udc00x"'), INVALID_TEXT),
        (with_raw("content", r'"\ude00\ud83d"'), INVALID_TEXT),  # a pair in the wrong order
        (with_raw("event_id", r'"e\uDBFF"'), INVALID_TEXT),
        (with_raw("tenant_id", r'"t\ud800"'), INVALID_TEXT),
        (with_raw("tool_calls", r'[{"args": {"q": ["\ud800"]}}]'), INVALID_TEXT),
        (with_raw("tool_calls", r'[{"\ud800": 1}]'), INVALID_TEXT),  # a key
        (with_raw("content", r'"x\ud800"').replace(b'"tenant_id": "acme", ', b""),
         INVALID_TEXT),  # the document checks come first
        (enc(created_at="9999-12-31T23:59:59-01:00"), OUT_OF_RANGE),  # overflows converting
        (enc(created_at="0001-01-01T00:00:00+01:00"), OUT_OF_RANGE),  # underflows converting
        (enc(created_at="0999-12-31T23:59:59Z"), OUT_OF_RANGE),  # before MySQL DATETIME
        (enc(created_at="1000-01-01T00:30:00+01:00"), OUT_OF_RANGE),  # 999-12-31 in UTC
        (enc(created_at="2026-13-01T00:00:00Z"), SCHEMA),  # no such date
        (enc(role="assistant", tool_calls=tool_calls_of(65_536)), TOO_LARGE),
        (enc(role="assistant", tool_calls=[{"a": "é" * 40_000}]), TOO_LARGE),  # bytes, not chars
        (enc(role="assistant", tool_calls=[{"a": "x"}], created_at="0999-01-01T00:00:00Z"),
         OUT_OF_RANGE),
        (enc(role="robot", created_at="0999-01-01T00:00:00Z"), SCHEMA),  # two kinds: schema
        (enc(tool_calls="call"), SCHEMA),
        (enc(tool_calls=[1, 2]), SCHEMA),
        (enc(event_id="e" * 129), SCHEMA),  # the event_id column holds 128 characters
        (enc(conversation_id="c" * 256), SCHEMA),
        (enc(name="n" * 256), SCHEMA),
        (enc(tool_call_id="t" * 256), SCHEMA),
        (enc(tenant_id="t" * 65), SCHEMA),
        (enc(type=["message"]), UNKNOWN_TYPE),
        (enc(content=None), SCHEMA),  # NOT NULL
        # ids are compared exactly: what MySQL or a provider would trim is refused
        (enc(user_id="alice "), BAD_ID),
        (enc(user_id=" alice"), BAD_ID),
        (enc(user_id="alice\t"), BAD_ID),
        (enc(agent_id="bot\u00a0"), BAD_ID),  # a no-break space
        (enc(conversation_id="c1\n"), BAD_ID),
        (enc(user_id=" "), BAD_ID),
        (enc(agent_id="a" * 250), SCHEMA),  # its cube, agent_ and the id, is 256 characters
    ],
)
def test_rejections_name_one_reason(raw: bytes | None, reason: str) -> None:
    out = decode_chat_event(raw, 65_536)
    assert isinstance(out, Rejected)
    assert out.reason == reason and reason in REASONS
    assert out.message and out.error_class
    out.message.encode("utf-8")  # fit for a header: no surrogates


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
        (with_raw("content", r'"\ud83d\ude00 and \u00e9"'), ChatMessage),  # a surrogate pair
        (with_raw("content", r'"\\ud800"'), ChatMessage),  # an escaped backslash, not an escape
        (enc(content="😀 a\u0000b"), ChatMessage),  # astral characters and NUL are text
        (with_raw("tool_calls", '[{"a": ' + nested(61) + "}]"), ChatMessage),  # 64 levels
        (enc(role="assistant", tool_calls=tool_calls_of(65_535)), ChatMessage),
        (enc(created_at="9999-12-31T23:59:59.999999Z"), ChatMessage),
        (enc(created_at="9999-12-31T23:59:59+01:00"), ChatMessage),
        (enc(created_at="1000-01-01T00:00:00Z"), ChatMessage),
        (enc(created_at="1000-01-01T00:00:00-01:00"), ChatMessage),
        (with_raw("tool_calls", '[{"n": 1.5e300, "big": ' + "9" * 300 + "}]"), ChatMessage),
        (enc(event_id="é" * 128, name="ü" * 255), ChatMessage),  # characters, not bytes
    ],
)
def test_valid_events_decode(raw: bytes, kind: type) -> None:
    assert isinstance(decode_chat_event(raw, 65_536), kind)


def test_limit_is_configurable() -> None:
    assert isinstance(decode_chat_event(enc(content="x" * 11), 10), Rejected)
    assert isinstance(decode_chat_event(enc(content="x" * 10), 10), ChatMessage)


@pytest.mark.parametrize(
    ("raw", "model", "reason"),
    [
        (b"\xff", IdleCheck, UNDECODABLE),
        (b'{"tenant_id": "t", "conversation_id": ' + nested(500).encode() + b"}", IdleCheck,
         TOO_DEEP),
        (b'{"tenant_id": "t", "conversation_id": "c\\ud800", "session_seq": 1, '
         b'"idle_for_s": 1, "checked_at": "2026-11-30T08:00:00Z"}', IdleCheck, INVALID_TEXT),
        (b'{"tenant_id": "t", "conversation_id": "c", "session_seq": 1, '
         b'"idle_for_s": 1, "checked_at": "9999-12-31T23:59:59-01:00"}', IdleCheck, OUT_OF_RANGE),
        (b'{"tenant_id": "t", "conversation_id": "c", "session_seq": 1, '
         b'"idle_for_s": 1e308, "checked_at": "2026-11-30T08:00:00Z"}', IdleCheck, None),
        (b'{"tenant_id": "t", "conversation_id": "c", "session_seq": 0, '
         b'"idle_for_s": 1, "checked_at": "2026-11-30T08:00:00Z"}', IdleCheck, SCHEMA),
        (b'{"closed_id": "t/c#1", "tenant_id": "t", "user_id": "u", "agent_id": "a", '
         b'"conversation_id": "c", "trigger": "idle", "session_seq": 1, '
         b'"closed_at": "9999-12-31T23:59:59-01:00", "last_activity": "2026-11-30T08:00:00Z", '
         b'"message_count": 1}', SessionClosed, OUT_OF_RANGE),
        (b'{"closed_id": "t/c#1", "tenant_id": "t", "user_id": "u", "agent_id": "a", '
         b'"conversation_id": "c", "trigger": "idle", "session_seq": 1, '
         b'"closed_at": "2026-11-30T09:00:00Z", "last_activity": "2026-11-30T08:00:00", '
         b'"message_count": 1}', SessionClosed, None),
    ],
)
def test_internal_records_get_the_same_checks(raw: bytes, model: type, reason: str | None) -> None:
    out = decode_record(raw, model)
    if reason is None:
        assert isinstance(out, model)
    else:
        assert isinstance(out, Rejected) and out.reason == reason, out



@pytest.mark.parametrize(("written", "want"), [
    ("2026-12-01T06:48Z", "2026-12-01T06:48:00+00:00"),  # OffsetDateTime.toString() at :00
    ("2026-12-01T06:48+01:00", "2026-12-01T05:48:00+00:00"),
    ("2026-12-01T06:48:00.123456789Z", "2026-12-01T06:48:00.123456+00:00"),
    (1796107680, "2026-12-01T06:48:00+00:00"),  # epoch seconds
    (1796107680.5, "2026-12-01T06:48:00.500000+00:00"),  # Jackson's Instant: seconds.nanos
    (1796107680500, "2026-12-01T06:48:00.500000+00:00"),  # epoch milliseconds
])
def test_created_at_as_java_producers_write_it(written: object, want: str) -> None:
    ev = decode_chat_event(enc(created_at=written), 65_536)
    assert not isinstance(ev, Rejected), ev
    assert ev.created_at.astimezone(UTC).isoformat() == want


def test_a_time_memstream_cannot_read_says_which_forms_it_reads() -> None:
    rejected = decode_chat_event(enc(created_at="2026-11-30T08:00:00"), 65_536)
    assert isinstance(rejected, Rejected) and rejected.reason == BAD_TIME
    assert "RFC 3339" in rejected.message and "milliseconds" in rejected.message
