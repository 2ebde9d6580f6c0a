"""Times as memstream stores and compares them.

Every ``DateTime`` column holds a naive datetime in UTC; records, providers
and replies carry aware ones. These are the conversions between the two (the
wire records label a naive time UTC themselves, so that ``streams.client``
loads nothing beyond ``streams.wire``), and both read a naive datetime as UTC
already (never as local time):

* :func:`naive_utc` — the database's form: an aware time converted to UTC
  with its offset dropped; a naive one unchanged;
* :func:`aware_utc` — an aware time: a naive one labelled UTC; an aware one
  unchanged (its own offset kept, the instant is the same).

Both pass ``None`` through, for optional columns. Pure: the standard library
only, so models and rules may use it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import overload


def naive_utc_now() -> datetime:
    """Now, in the database's form (naive UTC)."""
    return datetime.now(UTC).replace(tzinfo=None)


@overload
def naive_utc(ts: datetime) -> datetime: ...


@overload
def naive_utc(ts: None) -> None: ...


def naive_utc(ts: datetime | None) -> datetime | None:
    if ts is None or ts.tzinfo is None:
        return ts
    return ts.astimezone(UTC).replace(tzinfo=None)


@overload
def aware_utc(ts: datetime) -> datetime: ...


@overload
def aware_utc(ts: None) -> None: ...


def aware_utc(ts: datetime | None) -> datetime | None:
    if ts is None or ts.tzinfo is not None:
        return ts
    return ts.replace(tzinfo=UTC)
