"""How a failed closing event is classified and routed: retry records carry their
attempt and due time in headers, any bytes there are read without raising, and
database errors are waited out only when transient."""

from __future__ import annotations

from datetime import UTC, datetime

import pymysql.err as my
import pytest
from sqlalchemy import exc as sa
from sqlalchemy.exc import IntegrityError, OperationalError

from streams.adapters.db.errors import is_transient
from streams.consolidation.failures import FailureRouter, attempt_of, classify, due_at
from streams.memory.cube_locks import CubeLockLost, CubeLockTimeout
from streams.memory.provider import ProviderRateLimited, ProviderRequestRejected, ProviderTimeout
from streams.memory.registry import ProviderNotConfigured
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
    assert classify(exc, is_transient).kind == kind


def test_an_unusable_retry_record_is_dead_lettered_as_the_closing_event() -> None:
    router = FailureRouter(source_topic="closed", retry_topic="retry", dlq_topic="dlq",
                         max_attempts=3, initial_s=1.0, max_s=2.0, is_transient=is_transient)
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
                         max_attempts=3, initial_s=1.0, max_s=2.0, is_transient=is_transient)
    r = SourceRecord("retry", 2, 17, b"k", b"garbage", [(ATTEMPT, b"x")])
    out = router.reject(r, "undecodable", "JSONDecodeError", "value is not JSON")
    assert header(out.headers, "memstream.source.topic") == b"retry"
    assert header(out.headers, "memstream.source.partition") == b"2"
    assert header(out.headers, "memstream.source.offset") == b"17"


@pytest.mark.parametrize(("exc", "kind", "reason"), [
    (OperationalError("x", {}, Exception("gone")), "infrastructure", "database_unavailable"),
    (ConnectionRefusedError(), "infrastructure", "database_unavailable"),
    (ProviderTimeout("t"), "retry", "provider_timeout"),
    (ProviderRateLimited("r"), "retry", "provider_rate_limited"),
    (ProviderRequestRejected("bad"), "dead", "provider_rejected"),
    (ProviderNotConfigured("memos"), "dead", "provider_not_configured"),
    (IntegrityError("x", {}, Exception("dup")), "retry", "internal_error"),
    (ValueError("bug"), "retry", "internal_error"),
    (CubeLockTimeout("busy"), "requeue", "cube_lock_timeout"),
    (CubeLockLost("gone"), "infrastructure", "cube_lock_lost"),
])
def test_failures_are_classified(exc: Exception, kind: str, reason: str) -> None:
    f = classify(exc, is_transient)
    assert (f.kind, f.reason) == (kind, reason)


def _router(rng: float = 1.0) -> FailureRouter:
    return FailureRouter(source_topic="closed", retry_topic="retry", dlq_topic="dlq",
                         max_attempts=4, initial_s=10.0, max_s=30.0, is_transient=is_transient,
                         clock=lambda: 1000.0, rng=lambda: rng)


def test_backoff_doubles_is_capped_and_jittered_in_the_upper_half() -> None:
    r = _router()
    assert [r.delay(n) for n in (1, 2, 3, 4)] == [10.0, 20.0, 30.0, 30.0]
    assert _router(0.0).delay(2) == 10.0


def test_retry_records_keep_key_value_and_foreign_headers() -> None:
    rec = SourceRecord("closed", 3, 17, b"c1", b"{}", [("traceparent", b"00-ab")])
    out = _router().route(rec, _router().classify(ProviderTimeout("slow")))
    assert (out.topic, out.key, out.value) == ("retry", b"c1", b"{}")
    assert header(out.headers, "traceparent") == b"00-ab"
    again = SourceRecord("retry", 0, 5, out.key, out.value, out.headers)
    assert attempt_of(again) == 2 and due_at(again) == 1010.0
    out2 = _router().route(again, _router().classify(ProviderTimeout("slow")))
    assert [k for k, _ in out2.headers].count(ATTEMPT) == 1
    assert header(out2.headers, ATTEMPT) == b"3"
    assert header(out2.headers, "memstream.origin.offset") == b"17"


def test_the_last_attempt_is_dead_lettered_as_from_the_source_topic() -> None:
    rec = SourceRecord("retry", 1, 9, b"c1", b"{}", [
        (ATTEMPT, b"4"), (NEXT_ATTEMPT_AT, b"x"), ("memstream.origin.partition", b"2"),
        ("memstream.origin.offset", b"17")])
    out = _router().route(rec, _router().classify(ProviderTimeout("slow")))
    assert out.topic == "dlq"
    assert header(out.headers, "memstream.source.topic") == b"closed"
    assert header(out.headers, "memstream.source.partition") == b"2"
    assert header(out.headers, "memstream.source.offset") == b"17"
    assert header(out.headers, NEXT_ATTEMPT_AT) is None


def test_missing_or_bad_retry_headers_mean_now_and_first_attempt() -> None:
    rec = SourceRecord("retry", 0, 0, None, None, [(ATTEMPT, b"x"), (NEXT_ATTEMPT_AT, b"?")])
    assert attempt_of(rec) == 1 and due_at(rec) == 0.0


@pytest.mark.parametrize(("attempt", "due"), [(None, 1010.0), (b"2", 1020.0), (b"4", 1030.0)])
def test_a_lock_timeout_is_requeued_with_its_attempt_unchanged(attempt: bytes | None,
                                                                due: float) -> None:
    headers = [] if attempt is None else [
        (ATTEMPT, attempt), ("memstream.origin.partition", b"2"),
        ("memstream.origin.offset", b"17")]
    rec = SourceRecord("retry" if attempt else "closed", 2, 17, b"c1", b"{}", headers)
    out = _router().route(rec, _router().classify(CubeLockTimeout("busy")))
    # never dead-lettered, even on the last attempt: waiting for a cube is not a failure
    assert (out.topic, out.key, out.value) == ("retry", b"c1", b"{}")
    again = SourceRecord("retry", 0, 5, out.key, out.value, out.headers)
    assert attempt_of(again) == int(attempt or b"1") and due_at(again) == due
    assert header(out.headers, "memstream.retry.reason") == b"cube_lock_timeout"
    assert header(out.headers, "memstream.origin.offset") == b"17"


def test_a_dead_letter_from_the_retry_topic_carries_the_timestamp_of_its_origin() -> None:
    """Every copy on the retry topic has a timestamp of its own; the dead letter (and
    so the dead-letter ledger's digest of the record) names the closing event's."""
    first = SourceRecord("closed", 3, 17, b"c1", b"{}", [], 1700000000.123)
    retry = _router().route(first, _router().classify(ProviderTimeout("slow")))
    copy = SourceRecord("retry", 0, 5, retry.key, retry.value, retry.headers, 1700000555.0)
    out = _router().route(copy, _router().classify(ProviderRequestRejected("bad")))
    assert out.topic == "dlq"
    assert header(out.headers, "memstream.source.timestamp") == b"1700000000123"
    unknown = SourceRecord("retry", 0, 6, b"c1", b"{}", [
        ("memstream.origin.partition", b"3"), ("memstream.origin.offset", b"17")], 1.0)
    dead = _router().route(unknown, _router().classify(ProviderRequestRejected("bad")))
    assert header(dead.headers, "memstream.source.timestamp") is None  # not the copy's
