"""Under load, a tenant with more than three times the queries (or the background's
messages) of all the others together is refused (held back); the weights halve over
time; a tenant alone, tenants asking alike, and a worker that just started refuse
nobody."""

from __future__ import annotations

import pytest

from streams.quotas.load_share import (
    ANOTHER,
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


@pytest.mark.parametrize(("mine", "total", "expected"), [
    (100.0, 100.0, False),  # alone: nobody to protect
    (100.0, 100.0 + ANOTHER / 2, False),  # the others had next to nothing lately
    (90.0, 100.0, True),  # nine times the other's
    (75.0, 100.0, False),  # three times: not more
    (76.0, 100.0, True),
    (60.0, 100.0, False),  # two tenants asking about as much
    (60.0, 101.0, False),  # ... and a third asking once: no cliff
    (40.0, 100.0, False),  # the largest of five, not most of all
])
def test_heavy_is_more_than_three_times_all_the_others(
        mine: float, total: float, expected: bool) -> None:
    assert heavy(mine, total) is expected


@pytest.mark.parametrize(("mine", "total", "expected"), [
    (4.0, 5.0, False),  # a worker just started: four of five queries is noise
    (9.9, 11.0, False),
    (10.0, 11.0, True),
])
def test_a_heavy_tenant_had_at_least_the_least(mine: float, total: float,
                                               expected: bool) -> None:
    assert heavy(mine, total, least=LEAST_QUERIES) is expected


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


def test_a_worker_just_started_refuses_nobody() -> None:
    share = share_of(4, 1)
    share.note_lag(1.0, 1.0)
    assert not share.refuses("loud", 1.0)


def test_a_tenant_asking_rarely_stays_protected() -> None:
    share, loud = LoadShare(0.05), 0
    for tick in range(600):  # 60 s under load: calm asks once every 6 s, loud 40 a second
        now = tick / 10
        share.note_lag(0.2, now)
        if tick % 60 == 0:
            assert not share.refuses("calm", now)
            share.answered("calm", now)
        for i in range(4):
            if not share.refuses("loud", now + i * 0.025):
                share.answered("loud", now + i * 0.025)
                loud += 1
    # held at about what its ten-query floor lets through, not 2,400 (between calm's
    # queries the weight of calm's last one is still counted)
    assert loud < 120


def test_tenants_asking_alike_in_turns_are_not_heavy() -> None:
    share = LoadShare(0.05)
    refused = 0
    for burst in range(12):  # a burst of 20 every 10 s each, 5 s apart, under load
        for tenant, at in (("a", burst * 10.0), ("b", burst * 10.0 + 5)):
            share.note_lag(0.2, at)
            for i in range(20):
                if share.refuses(tenant, at + i * 0.01):
                    refused += 1
                else:
                    share.answered(tenant, at + i * 0.01)
    assert refused == 0


def test_under_load_a_heavy_tenant_gets_about_three_times_the_others() -> None:
    share, answered = LoadShare(0.05), {"loud": 0, "calm": 0}
    for tick in range(1200):  # 120 s, loaded throughout: loud asks 40 a second, calm 5
        now = tick / 10
        share.note_lag(0.2, now)
        for tenant, n in (("loud", 4), ("calm", 1 if tick % 2 else 0)):
            for i in range(n):
                if not share.refuses(tenant, now + i * 0.02):
                    share.answered(tenant, now + i * 0.02)
                    answered[tenant] += 1
    assert answered["calm"] == 600
    assert 2.5 * 600 < answered["loud"] < 3.5 * 600 + 40  # not 4,800, not nothing


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


def test_a_time_going_back_never_makes_the_total_less_than_a_tenants_count() -> None:
    share = Shares()
    share.add("loud", 5.0, 200)
    share.add("calm", 4.9)  # told a little late
    assert share.total(20.0) - share.count("loud", 20.0) == pytest.approx(
        decayed(1.0, 15.0), rel=1e-6)


def test_the_tenants_kept_are_bounded_and_the_total_is_everyones() -> None:
    share = Shares(max_tenants=3)
    for i, tenant in enumerate(["a", "b", "c", "d", "e"]):
        share.add(tenant, float(i) * 0.001)
    assert share.count("a", 0.01) == 0.0 and share.count("e", 0.01) > 0.99
    assert share.total(0.005) == pytest.approx(5.0, rel=0.01)
