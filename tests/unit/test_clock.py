"""The naive-UTC conventions: what the database holds and what records carry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from streams.clock import aware_utc, naive_utc, naive_utc_now

CEST = timezone(timedelta(hours=2))
NOON = datetime(2024, 5, 1, 12, 0, 0, 123_456)


@pytest.mark.parametrize(
    ("given", "naive"),
    [
        pytest.param(NOON, NOON, id="naive-is-utc-already"),
        pytest.param(NOON.replace(tzinfo=UTC), NOON, id="aware-utc"),
        pytest.param(datetime(2024, 5, 1, 14, 0, 0, 123_456, tzinfo=CEST), NOON, id="aware-offset"),
        pytest.param(datetime(2024, 5, 1, 1, 30, tzinfo=timezone(timedelta(hours=5, minutes=30))),
                     datetime(2024, 4, 30, 20, 0), id="crosses-midnight"),
        pytest.param(None, None, id="none"),
    ],
)
def test_naive_utc(given: datetime | None, naive: datetime | None) -> None:
    got = naive_utc(given)
    assert got == naive
    assert got is None or got.tzinfo is None


@pytest.mark.parametrize(
    ("given", "aware"),
    [
        pytest.param(NOON, NOON.replace(tzinfo=UTC), id="naive-is-utc"),
        pytest.param(NOON.replace(tzinfo=UTC), NOON.replace(tzinfo=UTC), id="aware-utc"),
        pytest.param(datetime(2024, 5, 1, 14, 0, 0, 123_456, tzinfo=CEST),
                     datetime(2024, 5, 1, 14, 0, 0, 123_456, tzinfo=CEST), id="offset-kept"),
        pytest.param(None, None, id="none"),
    ],
)
def test_aware_utc(given: datetime | None, aware: datetime | None) -> None:
    got = aware_utc(given)
    assert got == aware
    assert got is None or aware is None or got.utcoffset() == aware.utcoffset()


def test_a_naive_time_is_never_read_as_local_time() -> None:
    assert naive_utc(NOON) is NOON
    assert aware_utc(NOON).utcoffset() == timedelta(0)


def test_round_trip() -> None:
    aware = datetime(2024, 5, 1, 14, 0, tzinfo=CEST)
    assert aware_utc(naive_utc(aware)) == aware
    assert naive_utc(aware_utc(NOON)) == NOON


def test_naive_utc_now() -> None:
    before = datetime.now(UTC).replace(tzinfo=None)
    now = naive_utc_now()
    assert now.tzinfo is None
    assert before <= now <= datetime.now(UTC).replace(tzinfo=None)
