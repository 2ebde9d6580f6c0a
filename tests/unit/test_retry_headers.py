"""Retry records carry their attempt and due time in headers: any bytes there are
read without raising, and database errors are waited out only when transient."""

from __future__ import annotations

from datetime import UTC, datetime

import pymysql.err as my
import pytest
from sqlalchemy import exc as sa

from streams.consolidation.failures import FailureRouter, attempt_of, classify, due_at
from streams.wire.envelope import SourceRecord
from streams.wire.headers import ATTEMPT, NEXT_ATTEMPT_AT, header


def rec(*headers: tuple[str, bytes]) -> SourceRecord:
    return SourceRecord("retry", 0, 7, b"k", b"{}", list(headers))


@pytest.mark.parametrize(
    ("raw", "attempt"),
    [
        (None, 1),
        (b"", 1),
        (b"3", 3),
        (b" 4 ", 4),
        (b"0", 1),
        (b"-7", 1),
        (b"2.5", 1),
        (b"\xff\xfe", 1),
        (b"9" * 5000, 1),  # more digits than Python converts
        (b"\x00", 1),
    ],
)
def test_attempt_header(raw: bytes | None, attempt: int) -> None:
    r = rec() if raw is None else rec((ATTEMPT, raw))
    assert attempt_of(r) == attempt


@pytest.mark.parametrize(
    ("raw", "due"),
    [
        (None, 0.0),
        (b"", 0.0),
        (b"2026-11-30T08:00:00+00:00", datetime(2026, 11, 30, 8, tzinfo=UTC).timestamp()),
        (b"2026-11-30T08:00:00", datetime(2026, 11, 30, 8, tzinfo=UTC).timestamp()),  # UTC
        (b"9999-12-31T23:59:59-01:00", datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()
         + 3600),
        (b"0001-01-01T00:00:00", datetime(1, 1, 1, tzinfo=UTC).timestamp()),
        (b"0001-01-01T00:00:00+01:00", datetime(1, 1, 1, tzinfo=UTC).timestamp() - 3600),
        (b"tomorrow", 0.0),
        (b"\xff\xfe", 0.0),
        (b"2026-02-30T00:00:00Z", 0.0),
        (b"2026-11-30T08:00:00+25:00", 0.0),
        (b"2026-11-30T08:00:00" + b"0" * 10_000, 0.0),
    ],
)
def test_due_header(raw: bytes | None, due: float) -> None:
    r = rec() if raw is None else rec((NEXT_ATTEMPT_AT, raw))
    assert due_at(r) == due


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (sa.OperationalError("x", {}, my.OperationalError(2013, "Lost connection")),
         "infrastructure"),
        (sa.OperationalError("x", {}, my.OperationalError(1213, "Deadlock")), "infrastructure"),
        # an error the data will always get is not waited out in place for ever
        (sa.OperationalError("x", {}, my.OperationalError(1366, "Incorrect string")), "retry"),
        (sa.DataError("x", {}, my.DataError(1406, "Data too long")), "retry"),
        (sa.OperationalError("x", {}, my.OperationalError(1105, "Unknown")), "retry"),
        (UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates"), "retry"),
    ],
)
def test_only_transient_database_errors_are_waited_out(exc: Exception, kind: str) -> None:
    assert classify(exc).kind == kind


def test_an_unusable_retry_record_is_dead_lettered_as_the_closing_event() -> None:
    router = FailureRouter(source_topic="closed", retry_topic="retry", dlq_topic="dlq",
                         max_attempts=3, initial_s=1.0, max_s=2.0)
    r = SourceRecord("retry", 1, 9, b"k", b"\xff", [
        (ATTEMPT, b"2"), ("memstream.origin.partition", b"3"),
        ("memstream.origin.offset", b"41"), ("trace", b"t")])
    out = router.reject(r, "undecodable", "UnicodeDecodeError", "value is not UTF-8")
    assert (out.topic, out.key, out.value) == ("dlq", b"k", b"\xff")
    assert header(out.headers, "memstream.source.topic") == b"closed"
    assert header(out.headers, "memstream.source.offset") == b"41"
    assert header(out.headers, "memstream.error.reason") == b"undecodable"
    assert header(out.headers, "trace") == b"t" and header(out.headers, ATTEMPT) is None


def test_a_retry_record_naming_no_origin_is_dead_lettered_as_it_was_read() -> None:
    router = FailureRouter(source_topic="closed", retry_topic="retry", dlq_topic="dlq",
                         max_attempts=3, initial_s=1.0, max_s=2.0)
    r = SourceRecord("retry", 2, 17, b"k", b"garbage", [(ATTEMPT, b"x")])
    out = router.reject(r, "undecodable", "JSONDecodeError", "value is not JSON")
    assert header(out.headers, "memstream.source.topic") == b"retry"
    assert header(out.headers, "memstream.source.partition") == b"2"
    assert header(out.headers, "memstream.source.offset") == b"17"
