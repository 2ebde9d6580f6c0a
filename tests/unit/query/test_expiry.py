"""When a request's caller has given up."""

from __future__ import annotations

import pytest

from streams.query.expiry import beyond_any_timeout, caller_gave_up
from streams.wire.query import MAX_TIMEOUT_MS, QueryOptions

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("case", "produced", "timeout_ms", "gave_up"),
    [
        ("just produced", NOW, 1000, False),
        ("within the timeout", NOW - 0.999, 1000, False),
        ("exactly at the timeout", NOW - 1.0, 1000, False),
        ("past the timeout", NOW - 1.001, 1000, True),
        ("a long timeout", NOW - 30.0, 60_000, False),
        ("long past a long timeout", NOW - 61.0, 60_000, True),
        ("produced in the future (clock skew)", NOW + 5.0, 1000, False),
        ("no timestamp", None, 1000, False),
        ("timestamp -1 (none)", -1.0, 1000, False),
        ("timestamp 0 (none)", 0.0, 10, False),
    ],
)
def test_caller_gave_up(case: str, produced: float | None, timeout_ms: int,
                        gave_up: bool) -> None:
    assert caller_gave_up(produced, NOW, timeout_ms) is gave_up, case


def test_beyond_any_timeout_is_the_longest_timeout_a_request_may_ask() -> None:
    assert QueryOptions.model_fields["timeout_ms"].metadata[-1].le == MAX_TIMEOUT_MS
    assert not beyond_any_timeout(NOW - MAX_TIMEOUT_MS / 1000, NOW)
    assert beyond_any_timeout(NOW - MAX_TIMEOUT_MS / 1000 - 0.01, NOW)
    assert not beyond_any_timeout(None, NOW)
