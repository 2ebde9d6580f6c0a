"""Stats API parameters: strict parsing, ISO times, hour and day buckets."""

from __future__ import annotations

from datetime import datetime

import pytest
from sqlalchemy import column, select
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.exc import CompileError

from streams.stats.buckets import (
    EpochBucket,
    TimeRange,
    bucket_number,
    bucket_start,
    iso,
    time_range,
)
from streams.stats.params import (
    BadRequest,
    Param,
    limit_param,
    offset_param,
    parse,
    parse_time,
    tenant_param,
)

PARAMS = (tenant_param(), limit_param(10, 100), offset_param(),
          Param("bucket", choices=("hour", "day"), default="day"),
          Param("from", "datetime", required=True))


def q(**kw: str | list[str]) -> dict[str, list[str]]:
    return {k: v if isinstance(v, list) else [v] for k, v in kw.items()}


def error(query: dict[str, list[str]], params: tuple[Param, ...] = PARAMS) -> BadRequest:
    with pytest.raises(BadRequest) as info:
        parse(query, params)
    return info.value


def test_defaults_and_types() -> None:
    v = parse(q(tenant="acme", **{"from": "2026-11-30T08:00:00Z"}), PARAMS)
    assert v.text("tenant") == "acme"
    assert v.integer("limit") == 10 and v.integer("offset") == 0
    assert v.text("bucket") == "day"
    assert v.time("from") == datetime(2026, 11, 30, 8)
    v = parse(q(tenant="acme", limit="100", offset="7", bucket="hour",
                **{"from": "2026-11-30"}), PARAMS)
    assert (v.integer("limit"), v.integer("offset"), v.text("bucket")) == (100, 7, "hour")


@pytest.mark.parametrize(("query", "code", "parameter"), [
    (q(), "missing_parameter", "tenant"),
    (q(tenant="a"), "missing_parameter", "from"),
    (q(tenant="", **{"from": "2026-01-01"}), "invalid_parameter", "tenant"),
    (q(tenant=" a", **{"from": "2026-01-01"}), "invalid_parameter", "tenant"),
    (q(tenant="a" * 65, **{"from": "2026-01-01"}), "invalid_parameter", "tenant"),
    (q(tenant="a\nb", **{"from": "2026-01-01"}), "invalid_parameter", "tenant"),
    (q(tenant=["a", "b"], **{"from": "2026-01-01"}), "repeated_parameter", "tenant"),
    (q(tenant="a", buckets="hour", **{"from": "2026-01-01"}), "unknown_parameter", "buckets"),
    (q(tenant="a", limit="0", **{"from": "2026-01-01"}), "out_of_range", "limit"),
    (q(tenant="a", limit="101", **{"from": "2026-01-01"}), "out_of_range", "limit"),
    (q(tenant="a", limit="ten", **{"from": "2026-01-01"}), "invalid_parameter", "limit"),
    (q(tenant="a", limit="1.5", **{"from": "2026-01-01"}), "invalid_parameter", "limit"),
    (q(tenant="a", offset="-1", **{"from": "2026-01-01"}), "out_of_range", "offset"),
    (q(tenant="a", offset="100001", **{"from": "2026-01-01"}), "out_of_range", "offset"),
    (q(tenant="a", bucket="week", **{"from": "2026-01-01"}), "invalid_parameter", "bucket"),
    (q(tenant="a", **{"from": "yesterday"}), "invalid_parameter", "from"),
    (q(tenant="a", **{"from": "2026-13-01"}), "invalid_parameter", "from"),
    (q(tenant="a", **{"from": "1969-12-31T23:59:59Z"}), "invalid_parameter", "from"),
    # past the last time UTC can hold: a 400, not a fault of the server
    (q(tenant="a", **{"from": "9999-12-31T23:59:59-01:00"}), "invalid_parameter", "from"),
    (q(tenant="a", **{"from": "9999-12-31T23:59:59.999999-23:59"}), "invalid_parameter",
     "from"),
])
def test_bad_parameters(query: dict[str, list[str]], code: str, parameter: str) -> None:
    err = error(query)
    assert (err.code, err.parameter, err.status) == (code, parameter, 400)
    assert err.body() == {"error": {"code": code, "message": err.message, "parameter": parameter}}
    assert parameter in err.message


@pytest.mark.parametrize(("raw", "expected"), [
    ("2026-11-30T08:00:00Z", datetime(2026, 11, 30, 8)),
    ("2026-11-30T08:00:00.123Z", datetime(2026, 11, 30, 8, 0, 0, 123000)),
    ("2026-11-30T09:30:00+01:30", datetime(2026, 11, 30, 8)),
    ("2026-11-30T09:30:00 01:30", datetime(2026, 11, 30, 8)),  # "+" unencoded in a URL
    ("2026-11-30T03:00:00-05:00", datetime(2026, 11, 30, 8)),
    ("2026-11-30T08:00:00", datetime(2026, 11, 30, 8)),  # no offset: UTC
    ("2026-11-30", datetime(2026, 11, 30)),
])
def test_times(raw: str, expected: datetime) -> None:
    assert parse_time(raw, "from") == expected


def test_bucket_numbers_round_trip() -> None:
    ts = datetime(2026, 11, 30, 8, 59, 59, 999999)
    assert bucket_start(bucket_number(ts, 3600), 3600) == datetime(2026, 11, 30, 8)
    assert bucket_start(bucket_number(ts, 86400), 86400) == datetime(2026, 11, 30)
    assert bucket_number(datetime(1970, 1, 1, 1), 3600) == 1
    assert iso(datetime(2026, 11, 30, 8, 0, 0, 5)) == "2026-11-30T08:00:00Z"


def test_range_buckets_cover_from_to_exclusive_end() -> None:
    span = TimeRange(datetime(2026, 11, 30, 8, 30), datetime(2026, 11, 30, 11), "hour")
    starts = [bucket_start(n, span.seconds) for n in span.numbers()]
    assert starts == [datetime(2026, 11, 30, h) for h in (8, 9, 10)]  # 11:00 is excluded
    span = TimeRange(datetime(2026, 11, 30), datetime(2026, 12, 2, 0, 0, 1), "day")
    assert len(span.numbers()) == 3


RANGE = (tenant_param(), Param("from", "datetime", required=True),
         Param("to", "datetime", required=True), Param("bucket", choices=("hour", "day")))


def test_time_range_checks() -> None:
    def span(start: str, end: str, bucket: str, most: int = 24) -> TimeRange:
        values = parse(q(tenant="a", bucket=bucket, **{"from": start, "to": end}), RANGE)
        return time_range(values, most)

    assert len(span("2026-11-30", "2026-12-01", "hour").numbers()) == 24
    with pytest.raises(BadRequest) as info:
        span("2026-11-30", "2026-12-01T00:00:01Z", "hour")
    assert info.value.code == "too_many_buckets" and "25 hour buckets" in info.value.message
    for start, end in (("2026-12-01", "2026-11-30"), ("2026-11-30", "2026-11-30")):
        with pytest.raises(BadRequest) as info:
            span(start, end, "day")
        assert info.value.code == "invalid_range"


def test_epoch_bucket_sql_per_dialect() -> None:
    expr = select(EpochBucket(column("created_at"), 3600))
    assert "TIMESTAMPDIFF(SECOND, '1970-01-01 00:00:00', created_at) DIV 3600" in str(
        expr.compile(dialect=mysql.dialect()))
    assert "CAST(strftime('%s', created_at) AS INTEGER) / 3600" in str(
        expr.compile(dialect=sqlite.dialect()))
    with pytest.raises(CompileError):
        str(expr.compile(dialect=postgresql.dialect()))
    day = select(EpochBucket(column("created_at"), 86400))
    assert "/ 86400" in str(day.compile(dialect=sqlite.dialect()))
    with pytest.raises(ValueError):
        EpochBucket(column("created_at"), 0)
