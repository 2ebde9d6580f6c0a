"""Which episodes the episode retention expires: folded ones only, beyond the cube's
count or older than the age, a tenant's override before the default."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from streams.consolidation.rules.episode_retention import (
    Episode,
    RetentionLimits,
    ranks,
    reason_to_retire,
    to_retire,
)

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
LIMITS = RetentionLimits(max_age_days=30, max_per_cube=100,
                         age_overrides={"short": 1, "keep": 0},
                         count_overrides={"small": 2, "keep": 0})


def episode(tenant: str = "t1", *, days: float = 0, rank: int = 1,
            folded: bool = True) -> Episode:
    return Episode("1", tenant, "u1", "a1", "user_profile", NOW - timedelta(days=days),
                   rank, folded)


@pytest.mark.parametrize(("e", "reason"), [
    (episode(days=31), "age"),
    (episode(days=29), None),
    (episode(days=31, folded=False), None),  # not in a summary: kept whatever its age
    (episode(rank=101), "count"),
    (episode(rank=100), None),
    (episode(rank=101, days=31), "count"),  # count first
    (episode(rank=500, folded=False), None),
    (episode("short", days=2), "age"),  # the tenant's own age
    (episode("small", rank=3), "count"),  # the tenant's own count
    (episode("small", rank=2), None),
    (episode("keep", days=3650, rank=10_000), None),  # 0 in an override: no limit
])
def test_reason_to_retire(e: Episode, reason: str | None) -> None:
    assert reason_to_retire(e, LIMITS, NOW) == reason


@pytest.mark.parametrize(("limits", "enabled"), [
    (RetentionLimits(), False),
    (RetentionLimits(max_age_days=1), True),
    (RetentionLimits(max_per_cube=5), True),
    (RetentionLimits(count_overrides={"t": 3}), True),
    (RetentionLimits(age_overrides={"t": 0}), False),
])
def test_enabled(limits: RetentionLimits, enabled: bool) -> None:
    assert limits.enabled is enabled


def test_nothing_goes_without_limits() -> None:
    assert to_retire([episode(days=9999, rank=9999)], RetentionLimits(), NOW) == []


def test_to_retire_keeps_the_order_and_gives_reasons() -> None:
    old, big, kept = episode(days=40), episode(rank=101), episode()
    assert to_retire([old, kept, big], LIMITS, NOW) == [(old, "age"), (big, "count")]


@pytest.mark.parametrize(("ids", "newer", "expected"), [
    ({1: [10, 11, 12]}, {}, {12: 1, 11: 2, 10: 3}),
    ({1: [10, 12]}, {1: 5}, {12: 6, 10: 7}),
    ({1: [3], 2: [4, 5]}, {2: 1}, {3: 1, 5: 2, 4: 3}),
])
def test_ranks(ids: dict[int, list[int]], newer: dict[int, int],
               expected: dict[int, int]) -> None:
    assert ranks(ids, newer) == expected
