"""Under load, a tenant with most of the queries answered lately is refused; the
weights halve over time; one tenant alone is never refused."""

from __future__ import annotations

import pytest

from streams.quotas.load_share import (
    ACTIVE,
    HALF_LIFE_S,
    HOLD_S,
    LEAST_QUERIES,
    LoadShare,
    Shares,
    decayed,
    heavy,
)


@pytest.mark.parametrize(("value", "since", "expected"), [
    (8.0, 0.0, 8.0),
    (8.0, HALF_LIFE_S, 4.0),
    (8.0, 3 * HALF_LIFE_S, 1.0),
    (8.0, -5.0, 8.0),  # a clock going back changes nothing
])
def test_weights_halve_every_half_life(value: float, since: float, expected: float) -> None:
    assert decayed(value, since) == pytest.approx(expected)


@pytest.mark.parametrize(("mine", "total", "tenants", "expected"), [
    (100.0, 100.0, 1, False),  # alone: nobody to protect
    (90.0, 100.0, 2, True),  # nine tenths of two tenants' queries
    (75.0, 100.0, 2, False),  # three quarters: not more than 1.5 an equal share of two
    (76.0, 100.0, 2, True),
    (60.0, 100.0, 2, False),  # two tenants asking about as much
    (51.0, 100.0, 3, True),  # more than half of three tenants'
    (50.0, 100.0, 3, False),
    (40.0, 100.0, 5, False),  # the largest of five, not most of all
    (ACTIVE / 2, ACTIVE / 2 + 0.01, 2, False),  # not asking lately
])
def test_heavy_is_most_of_the_queries_with_another_tenant_asking(
        mine: float, total: float, tenants: int, expected: bool) -> None:
    assert heavy(mine, total, tenants) is expected


@pytest.mark.parametrize(("mine", "total", "expected"), [
    (4.0, 5.0, False),  # a worker just started: four of five queries is noise
    (9.9, 11.0, False),
    (10.0, 11.0, True),
])
def test_a_heavy_tenant_had_at_least_the_least(mine: float, total: float,
                                               expected: bool) -> None:
    assert heavy(mine, total, 2, least=LEAST_QUERIES) is expected


def share_of(loud: int, calm: int, *, lag_s: float = 0.05) -> LoadShare:
    """Loud answered ``loud`` times and calm ``calm`` times, spread over the last second."""
    share = LoadShare(lag_s)
    for i in range(max(loud, calm)):
        at = i / max(loud, calm)
        if i < loud:
            share.answered("loud", at)
        if i < calm:
            share.answered("calm", at)
    return share


def test_a_heavy_tenant_is_refused_only_while_the_worker_is_loaded() -> None:
    share = share_of(40, 5)
    assert not share.refuses("loud", 1.0)  # not loaded yet
    share.note_lag(0.01, 1.0)
    assert not share.refuses("loud", 1.0)  # a lag below the bound
    share.note_lag(0.2, 1.0)
    assert share.refuses("loud", 1.0) and not share.refuses("calm", 1.0)
    assert share.refuses("loud", 1.0 + HOLD_S - 0.01)
    assert not share.refuses("loud", 1.0 + HOLD_S)  # the load is over


def test_alone_or_off_nobody_is_refused() -> None:
    alone = share_of(40, 0)
    alone.note_lag(1.0, 1.0)
    assert not alone.refuses("loud", 1.0)
    off = share_of(40, 5, lag_s=0.0)
    off.note_lag(10.0, 1.0)
    assert not off.loaded(1.0) and not off.refuses("loud", 1.0)


def test_a_refused_tenant_is_answered_again_as_its_share_falls() -> None:
    share = share_of(40, 5)
    now = 1.0
    while share.refuses("loud", now) or now == 1.0:  # loud refused, calm answered
        share.note_lag(0.2, now)
        share.answered("calm", now)
        now += 0.2
        assert now < 30, "loud was never answered again"
    assert share.queries.count("loud", now) <= 3 * share.queries.count("calm", now)


def test_background_work_is_weighed_by_its_size_and_waits_only_under_load() -> None:
    share = LoadShare(0.05)
    for second in range(10):  # calm: a run of 10 messages a second; loud: 2,000 every 4 s
        share.background.add("calm", float(second), 10)
        if second % 4 == 0:
            share.background.add("loud", float(second), 2000)
    assert not share.yields("loud", 10.0)
    share.note_lag(0.1, 10.0)
    assert share.yields("loud", 10.0) and not share.yields("calm", 10.0)
    assert not share.refuses("loud", 10.0)  # its queries are another share


def test_a_worker_just_started_refuses_nobody() -> None:
    share = share_of(4, 1)
    share.note_lag(1.0, 1.0)
    assert not share.refuses("loud", 1.0)


def test_the_tenants_kept_are_bounded_and_the_total_is_everyones() -> None:
    share = Shares(max_tenants=3)
    for i, tenant in enumerate(["a", "b", "c", "d", "e"]):
        share.add(tenant, float(i) * 0.001)
    assert share.count("a", 0.01) == 0.0 and share.count("e", 0.01) > 0.99
    assert share.total(0.005) == pytest.approx(5.0, rel=0.01)
    assert share.tenants(0.005) == 3
