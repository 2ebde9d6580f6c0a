"""Hour and day buckets over naive-UTC timestamps, the same on MySQL and SQLite.

A bucket is numbered by whole bucket lengths since 1970-01-01 00:00 UTC, so
bucket ``n`` starts at ``n * seconds`` after the epoch. :class:`EpochBucket`
computes that number in SQL without any session time zone:

* MySQL / MariaDB: ``TIMESTAMPDIFF(SECOND, '1970-01-01 00:00:00', ts) DIV n``
  (plain datetime arithmetic; ``UNIX_TIMESTAMP`` would apply the session zone);
* SQLite: ``CAST(strftime('%s', ts) AS INTEGER) / n`` (integer division).

Other dialects raise :class:`~sqlalchemy.exc.CompileError`. The expression
renders identically in ``SELECT`` and ``GROUP BY`` (the bucket length is a
literal, not a bound parameter), which MySQL's ``ONLY_FULL_GROUP_BY`` needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import BigInteger, literal_column
from sqlalchemy.exc import CompileError
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.functions import FunctionElement

from streams.stats.params import BadRequest, Values

BUCKETS: dict[str, int] = {"hour": 3600, "day": 86_400}
EPOCH = datetime(1970, 1, 1)


class EpochBucket(FunctionElement[int]):
    """The number of the ``seconds``-long bucket ``column`` falls in."""

    type = BigInteger()
    name = "epoch_bucket"
    inherit_cache = True

    def __init__(self, column: ColumnElement[Any], seconds: int) -> None:
        if seconds <= 0:
            raise ValueError("a bucket lasts at least one second")
        # the length travels as a literal clause, so it is part of the cache key
        super().__init__(column, literal_column(str(int(seconds))))

    @property
    def seconds(self) -> int:
        return int(str(list(self.clauses)[1]))


def _column(element: EpochBucket, compiler: SQLCompiler, **kw: Any) -> str:
    return str(compiler.process(next(iter(element.clauses)), **kw))


@compiles(EpochBucket)
def _unsupported(element: EpochBucket, compiler: SQLCompiler, **kw: Any) -> str:
    raise CompileError(f"time buckets are not implemented for {compiler.dialect.name}")


@compiles(EpochBucket, "mysql")
def _mysql(element: EpochBucket, compiler: SQLCompiler, **kw: Any) -> str:
    col = _column(element, compiler, **kw)
    return f"(TIMESTAMPDIFF(SECOND, '1970-01-01 00:00:00', {col}) DIV {element.seconds})"


@compiles(EpochBucket, "sqlite")
def _sqlite(element: EpochBucket, compiler: SQLCompiler, **kw: Any) -> str:
    col = _column(element, compiler, **kw)
    return f"(CAST(strftime('%s', {col}) AS INTEGER) / {element.seconds})"


def bucket_number(ts: datetime, seconds: int) -> int:
    """The bucket of a naive-UTC time, as :class:`EpochBucket` computes it in SQL."""
    return int((ts - EPOCH).total_seconds() // seconds)


def bucket_start(number: int, seconds: int) -> datetime:
    return EPOCH + timedelta(seconds=number * seconds)


def iso(ts: datetime) -> str:
    """A naive-UTC time as RFC 3339 with ``Z``."""
    return ts.replace(microsecond=0).isoformat() + "Z"


@dataclass(frozen=True)
class TimeRange:
    """``[start, end)`` in naive UTC, cut into ``bucket``-long buckets.

    The first bucket is the one ``start`` falls in, so it may begin before
    ``start``; rows before ``start`` are still not counted.
    """

    start: datetime
    end: datetime
    bucket: str

    @property
    def seconds(self) -> int:
        return BUCKETS[self.bucket]

    def numbers(self) -> range:
        last = bucket_number(self.end - timedelta(microseconds=1), self.seconds)
        return range(bucket_number(self.start, self.seconds), last + 1)


def time_range(values: Values, max_buckets: int) -> TimeRange:
    """The ``from``/``to``/``bucket`` parameters as a checked :class:`TimeRange`."""
    start, end, bucket = values.time("from"), values.time("to"), values.text("bucket")
    if start >= end:
        raise BadRequest("invalid_range", "from must be earlier than to", "from")
    span = TimeRange(start, end, bucket)
    count = len(span.numbers())
    if count > max_buckets:
        raise BadRequest(
            "too_many_buckets",
            f"{count} {bucket} buckets from {iso(start)} to {iso(end)}; at most {max_buckets} "
            "(shorten the range or use a longer bucket)",
            "bucket",
        )
    return span
