"""One quota of every tenant: overrides, the decisions counted, memory bounded."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from streams.quotas.book import QuotaBook
from streams.quotas.rules import Limit
from streams.settings import Settings, TenantQuota
from streams.worker.quotas import delays_events, events_may_delay, events_quota, queries_quota


def decisions(tenant: str, quota: str, decision: str) -> float | None:
    return REGISTRY.get_sample_value("memstream_quota_decisions_total",
                                     {"tenant": tenant, "quota": quota, "decision": decision})


def book(**overrides: Limit) -> QuotaBook:
    return QuotaBook("queries", Limit(2.0, 2.0), overrides, max_tenants=3)


@pytest.mark.parametrize(("tenant", "n", "allowed"), [
    ("calm-1", 2, 2),          # the default: 2 at once
    ("calm-1", 5, 2),
    ("big-1", 5, 5),           # an override: 10 at once
    ("free-1", 50, 50),        # rate 0: no limit
])
def test_overrides(tenant: str, n: int, allowed: int) -> None:
    b = book(**{"big-1": Limit(10.0, 10.0), "free-1": Limit(0.0, 1.0)})
    assert sum(b.take(tenant, 0.0).allowed for _ in range(n)) == allowed


def test_tenants_have_buckets_of_their_own() -> None:
    b = book()
    assert [b.take("loud-2", 0.0).allowed for _ in range(3)] == [True, True, False]
    assert b.take("calm-2", 0.0).allowed
    assert b.take("loud-2", 0.5).allowed  # one back after 1/2 s


def test_every_decision_is_counted_by_tenant() -> None:
    b = book()
    for _ in range(5):
        b.take("loud-3", 0.0)
    assert decisions("loud-3", "queries", "allowed") == 2
    assert decisions("loud-3", "queries", "refused") == 3
    tally = b.tally("loud-3", 0.0)
    assert (tally.allowed, tally.refused, tally.tokens) == (2, 3, 0.0)
    assert b.tally("unseen-3", 0.0).allowed == 0


def test_a_refusal_says_which_quota_and_when() -> None:
    b = book()
    b.take("loud-4", 0.0)
    b.take("loud-4", 0.0)
    refused = b.take("loud-4", 0.25)
    assert not refused.allowed
    assert refused.retry_after_s == pytest.approx(0.25)
    assert refused.message == ("over the queries quota of tenant 'loud-4' (2 a second, "
                               "2 at once): retry in 0.250 s")
    per_minute = QuotaBook("erasures", Limit(6 / 60, 1.0), unit_s=60.0)
    per_minute.take("loud-4", 0.0)
    assert "(6 a minute, 1 at once): retry in 10.000 s" in per_minute.take("loud-4", 0.0).message


def test_peek_counts_and_takes_nothing() -> None:
    b = book()
    b.take("loud-5", 0.0)
    assert b.peek("loud-5", 0.0).allowed
    assert b.peek("loud-5", 0.0).allowed
    b.take("loud-5", 0.0)
    assert not b.peek("loud-5", 0.0).allowed
    assert b.peek("never-5", 0.0).allowed
    assert len(b) == 1
    assert decisions("loud-5", "queries", "refused") is None


def test_a_token_given_back_is_there_again_and_nothing_is_counted() -> None:
    b = book()
    assert b.take("dup-5", 0.0, count=False).allowed
    assert b.take("dup-5", 0.0, count=False).allowed
    assert not b.peek("dup-5", 0.0).allowed
    b.give_back("dup-5", 0.0)
    assert b.peek("dup-5", 0.0).allowed
    assert b.tally("dup-5", 0.0).tokens == pytest.approx(1.0)
    assert (b.tally("dup-5", 0.0).allowed, b.tally("dup-5", 0.0).refused) == (0, 0)
    assert decisions("dup-5", "queries", "allowed") is None


def test_a_tenant_forgotten_meanwhile_gets_nothing_back_and_forgets_no_other() -> None:
    b = book()  # three tenants at most
    assert b.take("gone-6", 0.0, count=False).allowed
    b.take("kept-6", 0.0)
    b.take("kept-6", 0.0)  # its bucket empty
    b.take("x-6", 0.0)
    b.take("y-6", 0.0)  # gone-6 forgotten
    b.give_back("gone-6", 0.0)
    assert len(b) == 3 and b.tally("kept-6", 0.0).tokens == pytest.approx(0.0)
    assert b.tally("kept-6", 0.0).allowed == 2


def test_memory_is_bounded_and_the_oldest_forgotten_with_its_series() -> None:
    b = book()
    for i in range(50):
        b.take(f"many-{i}", 0.0)
    assert len(b) == 3
    assert decisions("many-0", "queries", "allowed") is None  # forgotten
    assert decisions("many-49", "queries", "allowed") == 1
    b.take("many-47", 0.0)  # seen again: now the most recent
    b.take("new-6", 0.0)
    assert decisions("many-47", "queries", "allowed") == 2
    assert decisions("many-48", "queries", "allowed") is None


def test_from_settings() -> None:
    s = Settings(quotas={"queries_per_s": 4, "queries_burst": 8, "max_tenants": 7,
                         "tenant_overrides": {"acme": TenantQuota(queries_per_s=40)}})
    b = queries_quota(s)
    assert b.limit("other") == Limit(4.0, 8.0)
    assert b.limit("acme") == Limit(40.0, 8.0)  # unset fields take the defaults
    assert b.max_tenants == 7


def test_overrides_name_tenants(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSTREAM_QUOTAS__TENANT_OVERRIDES",
                       '{"loud": {"queries_per_s": 2, "queries_burst": 3}}')
    assert Settings().quotas.tenant_overrides["loud"] == TenantQuota(queries_per_s=2,
                                                                     queries_burst=3)
    with pytest.raises(ValueError, match="not tenant ids: a/b"):
        Settings(quotas={"tenant_overrides": {"a/b": {}}})


def test_events_quota_from_settings_dead_letters_and_is_off_by_default() -> None:
    assert events_quota(Settings()) is None  # no tenant has a limit: nothing weighed
    s = Settings(quotas={"events_per_s": 10, "events_burst": 20,
                         "tenant_overrides": {"acme": TenantQuota(events_per_s=0),
                                              "trial": TenantQuota(events_burst=2)}})
    b = events_quota(s)
    assert b is not None and b.quota == "events"
    assert (b.limit("other"), b.limit("acme"), b.limit("trial")) == (
        Limit(10.0, 20.0), Limit(0.0, 20.0), Limit(10.0, 2.0))
    only = events_quota(Settings(quotas={"tenant_overrides": {"loud": {"events_per_s": 5}}}))
    assert only is not None and only.limit("loud").rate == 5 and only.limit("x").unlimited


@pytest.mark.parametrize(("quotas", "delayed", "may_delay"), [
    # the default action, delay, for the tenants with a limit
    ({"tenant_overrides": {"loud": {"events_per_s": 5}}}, {"loud": True, "x": False}, True),
    ({"events_per_s": 5}, {"loud": True, "x": True}, True),
    # dead letters asked for by every tenant with a limit: nothing is ever held
    ({"events_per_s": 5, "events_over_quota": "dead_letter"}, {"x": False}, False),
    ({"tenant_overrides": {"loud": {"events_per_s": 5, "events_over_quota": "dead_letter"},
                           "calm": {"events_over_quota": "delay"}}},
     {"loud": False, "calm": False}, False),
    # one tenant delays, the others dead-letter
    ({"events_per_s": 5, "events_over_quota": "dead_letter",
      "tenant_overrides": {"slow": {"events_over_quota": "delay"}}},
     {"slow": True, "x": False}, True),
])
def test_whose_events_are_held_back(quotas: dict[str, object], delayed: dict[str, bool],
                                    may_delay: bool) -> None:
    b = events_quota(Settings(quotas=quotas))
    assert b is not None
    assert {t: delays_events(b)(t) for t in delayed} == delayed
    assert events_may_delay(b) is may_delay


def test_a_refusal_is_counted_under_the_quota_s_own_name() -> None:
    b = QuotaBook("events", Limit(1.0, 1.0), refused_as="dead_lettered", max_tenants=1)
    assert [b.take("loud-7", 0.0).allowed for _ in range(3)] == [True, False, False]
    assert decisions("loud-7", "events", "allowed") == 1
    assert decisions("loud-7", "events", "dead_lettered") == 2
    assert decisions("loud-7", "events", "refused") is None
    assert b.tally("loud-7", 0.0).refused == 2
    b.take("other-7", 0.0)  # forgotten with both its series
    assert decisions("loud-7", "events", "dead_lettered") is None
