"""Properties of the real decoders over arbitrary input: they return a record or
a rejection and never raise, and what they accept every sink can take."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Column
from sqlalchemy.dialects import mysql

from streams.adapters.db.schema.conversation import conversation_message
from streams.ingest.model import message_row, row_to_doc
from streams.session.model import table_key
from streams.wire.decode import REASONS, Rejected, decode_chat_event, decode_record
from streams.wire.records import DATETIME_MAX, DATETIME_MIN, ChatMessage, IdleCheck, SessionClosed
from tests.support.poison import ID, poison_records, valid_events

MEDIUMTEXT_BYTES, TEXT_BYTES = 16_777_215, 65_535  # what MySQL's text columns hold


def assert_fits(column: Column[Any], value: Any) -> None:
    """``value`` as MySQL (and SQLite) stores it in ``column``, or fail."""
    if value is None:
        assert column.nullable or column.primary_key, f"{column.name} is NOT NULL"
        return
    impl = column.type.dialect_impl(mysql.dialect())
    if isinstance(value, str):
        encoded = value.encode("utf-8")  # no lone surrogates
        length = getattr(impl, "length", None)
        if length is not None:  # VARCHAR(n): n characters
            assert len(value) <= length, column.name
        else:
            limit = MEDIUMTEXT_BYTES if isinstance(impl, mysql.MEDIUMTEXT) else TEXT_BYTES
            assert len(encoded) <= limit, column.name
    elif isinstance(value, datetime):
        assert value.tzinfo is None  # stored as naive UTC
        assert DATETIME_MIN <= value.replace(tzinfo=UTC) <= DATETIME_MAX, column.name


def assert_storable(event: Any) -> None:
    table_key(event.tenant_id, event.conversation_id).encode("utf-8")  # the sessions table
    if not isinstance(event, ChatMessage):
        assert DATETIME_MIN <= event.created_at.astimezone(UTC) <= DATETIME_MAX
        return
    row = message_row(event, datetime.now(UTC), "origin")
    for column in conversation_message.columns:
        if column.name != "id":
            assert_fits(column, row[column.name])
    # the cache writes exactly this, and reads it back
    doc = row_to_doc(row)
    json.loads(json.dumps(doc, ensure_ascii=False, allow_nan=False).encode("utf-8"))


def check(raw: bytes | None) -> None:
    out = decode_chat_event(raw, 65_536)
    if isinstance(out, Rejected):
        assert out.reason in REASONS
        out.message.encode("utf-8")  # fit for a header
        assert decode_chat_event(raw, 65_536) == out  # one input, one reason
    else:
        assert_storable(out)


@given(st.binary(max_size=400))
def test_arbitrary_bytes(raw: bytes) -> None:
    check(raw)


@given(poison_records)
def test_poison_records(raw: bytes) -> None:
    check(raw)


@given(valid_events)
def test_valid_events_decode(doc: dict[str, Any]) -> None:
    out = decode_chat_event(json.dumps(doc).encode(), 65_536)
    assert not isinstance(out, Rejected), out
    assert out.event_id == ID
    assert_storable(out)


@given(poison_records)
def test_internal_records(raw: bytes) -> None:
    for model in (IdleCheck, SessionClosed):
        out = decode_record(raw, model)
        if isinstance(out, Rejected):
            assert out.reason in REASONS
        else:
            assert isinstance(out, model)
