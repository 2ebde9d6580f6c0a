"""Spans leave the worker without content in their error text."""

from __future__ import annotations

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import Status, StatusCode

from streams.worker.span_redaction import scrubbed

ROW = "Duplicate entry 'I was diagnosed with diabetes' for key 'uq'"
SQL = "(1062, \"Duplicate entry 'x'\") [SQL: INSERT INTO m VALUES (%s)] [parameters: ('hi',)]"


def test_the_status_and_exception_events_are_redacted() -> None:
    span = ReadableSpan("INSERT", status=Status(StatusCode.ERROR, SQL), events=(
        Event("exception", {"exception.type": "IntegrityError", "exception.message": ROW,
                            "exception.stacktrace": f"Traceback ... {ROW}"}),
        Event("other", {"n": 1})))
    out = scrubbed(span)
    assert out.status.status_code is StatusCode.ERROR
    assert "parameters" not in (out.status.description or "")
    assert "INSERT INTO" not in (out.status.description or "")
    exc, other = out.events
    assert exc.attributes is not None
    assert "diabetes" not in str(dict(exc.attributes))
    assert "exception.stacktrace" not in exc.attributes
    assert exc.attributes["exception.type"] == "IntegrityError"
    assert other.attributes == {"n": 1}


def test_a_clean_span_is_passed_as_it_is() -> None:
    span = ReadableSpan("SELECT", status=Status(StatusCode.OK))
    assert scrubbed(span) is span
