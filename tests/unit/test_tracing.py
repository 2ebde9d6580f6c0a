"""The trace context on Kafka headers: read, written, linked; and a session's
sampled message traces carried to its closing event."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from streams import tracing
from streams.session.model import SessionState
from streams.wire.headers import TRACEPARENT, TRACESTATE
from streams.wire.records import TRACE_LINKS_KEPT, ChatMessage
from tests.support.spans import named, recording

SAMPLED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
UNSAMPLED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
TRACE_ID = int("0af7651916cd43dd8448eb211c80319c", 16)


def tp(n: int, flags: str = "01") -> str:
    return f"00-{n:032x}-{n:016x}-{flags}"


@pytest.mark.parametrize(("headers", "found"), [
    ([], False),
    ([("other", b"x")], False),
    ([(TRACEPARENT, SAMPLED.encode())], True),
    ([(TRACEPARENT, b"not a traceparent")], True),  # a context, but no valid span in it
])
def test_context_of(headers: list[tuple[str, bytes]], found: bool) -> None:
    assert (tracing.context_of(headers) is not None) == found


def test_a_span_continues_the_records_trace_and_what_it_sends_carries_it() -> None:
    with (recording() as spans,
          tracing.consumer_span("process q", [(TRACEPARENT, SAMPLED.encode())]),
          tracing.producer_span("replies", 3)):
        out = tracing.with_context([("kafka_correlationId", b"c"),
                                    (TRACEPARENT, b"stale"), (TRACESTATE, b"a=b")])
    process, = named(spans, "process q")
    send, = named(spans, "send replies")
    assert process.context.trace_id == TRACE_ID
    assert process.parent is not None and process.parent.span_id == int("b7ad6b7169203331", 16)
    assert send.parent is not None and send.parent.span_id == process.context.span_id
    assert send.attributes is not None
    assert send.attributes["messaging.destination.name"] == "replies"
    assert send.attributes["messaging.destination.partition.id"] == "3"
    assert out[0] == ("kafka_correlationId", b"c")
    written = dict(out[1:])
    assert written[TRACEPARENT].decode() == f"00-{TRACE_ID:032x}-{send.context.span_id:016x}-01"
    assert TRACESTATE not in written  # the stale one replaced, none in the context
    assert [k for k, _ in out].count(TRACEPARENT) == 1


def test_without_a_context_headers_are_unchanged() -> None:
    headers = [("a", b"1"), (TRACEPARENT, SAMPLED.encode())]
    assert tracing.with_context(headers) == headers


def test_the_upstream_context_passes_through_a_span_that_does_not_record() -> None:
    # no provider recording here (or one not sampling): what memstream sends keeps
    # the upstream's trace
    with tracing.consumer_span("p", [(TRACEPARENT, UNSAMPLED.encode())]):
        out = dict(tracing.with_context())
    assert out[TRACEPARENT].decode().startswith("00-0af7651916cd43dd8448eb211c80319c-")


@pytest.mark.parametrize(("exporting", "value", "kept"), [
    (False, SAMPLED, None),
    (True, SAMPLED, SAMPLED),
    (True, UNSAMPLED, None),
    (True, "garbage", None),
])
def test_traceparent_of(monkeypatch: pytest.MonkeyPatch, exporting: bool, value: str,
                        kept: str | None) -> None:
    monkeypatch.setattr(tracing, "_exporting", exporting)
    assert tracing.traceparent_of([(TRACEPARENT, value.encode())]) == kept


def test_links_are_the_valid_contexts_at_most_the_limit() -> None:
    values: list[str | None] = [tp(1), "garbage", None, tp(2), tp(3)]
    links = tracing.links_of(values, limit=2)
    assert [link.context.trace_id for link in links] == [1, 2]
    assert tracing.links_of([[(TRACEPARENT, tp(9).encode())], []])[0].context.span_id == 9


def _msg(n: int) -> ChatMessage:
    return ChatMessage.model_validate({
        "type": "message", "event_id": f"e{n}", "tenant_id": "t", "conversation_id": "c",
        "user_id": "u",
        "agent_id": "a", "role": "user", "content": "hi",
        "created_at": datetime(2026, 1, 1, 0, 0, n % 60, tzinfo=UTC).isoformat()})


def test_a_session_names_its_newest_sampled_messages_in_its_closing_event() -> None:
    state = SessionState.new(_msg(0))
    n = TRACE_LINKS_KEPT + 4
    for i in range(n):
        state.apply_message(_msg(i), "chat", i, 1.0,
                            traceparent=tp(i + 1) if i != 5 else None)
    again = SessionState.from_table(state.to_table())
    assert again is not None and again.trace_links == state.trace_links
    closed = state.close("explicit", 2.0)
    assert closed is not None
    assert closed.trace_links == [tp(i + 1) for i in range(n) if i != 5][-TRACE_LINKS_KEPT:]
    assert state.trace_links == []
    assert "trace_links" not in state.to_table()  # nothing kept when there is none


@pytest.mark.parametrize("value", ["€-not-ascii", "x" * 1_000_000, "", "00-zz"])
def test_a_hostile_link_is_left_out(value: str) -> None:
    assert tracing.links_of([value, tp(3)])[0].context.trace_id == 3
    assert len(tracing.links_of([value])) == 0


def test_headers_too_long_are_not_read() -> None:
    huge = [(TRACEPARENT, SAMPLED.encode()), ("tracestate", b"k=" + b"v" * 600),
            ("baggage", b"k=" + b"v" * 9000)]
    ctx = tracing.context_of(huge)
    assert ctx is not None  # the traceparent is read, the rest is not
    with tracing.consumer_span("p", huge):
        out = dict(tracing.with_context())
    assert "tracestate" not in out and "baggage" not in out


@pytest.mark.parametrize(("links", "kept"), [
    (["€", 5, None, tp(1)], [tp(1)]),
    ([tp(i) for i in range(1, 40)], [tp(i) for i in range(40 - TRACE_LINKS_KEPT, 40)]),
    ("not a list", []),
    ([SAMPLED.upper()], []),  # W3C: lowercase hex only
])
def test_a_closing_events_links_never_refuse_it(links: object, kept: list[str]) -> None:
    from streams.wire.records import SessionClosed
    closed = SessionClosed.model_validate({
        "closed_id": "t/c#1", "tenant_id": "t", "user_id": "u", "agent_id": "a",
        "conversation_id": "c", "trigger": "explicit", "session_seq": 1,
        "closed_at": "2026-01-01T00:00:00Z", "last_activity": "2026-01-01T00:00:00Z",
        "message_count": 1, "trace_links": links})
    assert closed.trace_links == kept


def test_a_failed_span_names_the_exception_type_only() -> None:
    with recording() as spans, pytest.raises(ValueError), tracing.span("work"):
        raise ValueError("Duplicate entry 'my card is 4111 1111 1111 1111' for key")
    span, = named(spans, "work")
    assert span.status.description == "ValueError"
    assert not span.events  # no exception event, no message, no stack
