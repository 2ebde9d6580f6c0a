"""A quota on a count held at once: the tenant's limit (an override before the
default, 0 none), each decision counted in the metric and the tenant's tally, the
least recently seen tenants forgotten with their series."""

from __future__ import annotations

import pytest

from streams.metrics import QUOTA_DECISIONS
from streams.quotas.counts import CountQuota


def counted(tenant: str, quota: str, decision: str) -> float:
    return QUOTA_DECISIONS.labels(tenant, quota, decision)._value.get()


@pytest.mark.parametrize(("tenant", "held", "allowed"), [
    ("a", 0, True), ("a", 2, True), ("a", 3, False), ("a", 9, False),
    ("big", 9, True), ("big", 10, False),  # its override
    ("free", 10**9, True),  # 0: no limit
])
def test_decide(tenant: str, held: int, allowed: bool) -> None:
    q = CountQuota("cube_memories_t", 3, {"big": 10, "free": 0})
    assert q.decide(tenant, held) is allowed
    assert q.tally(tenant) == ((1, 0) if allowed else (0, 1))


def test_decisions_are_counted_and_shown() -> None:
    q = CountQuota("sessions_t", 2)
    q.decide("acme", 0)
    q.record("acme", False)
    assert counted("acme", "sessions_t", "allowed") == 1
    assert counted("acme", "sessions_t", "refused") == 1
    assert q.view("acme", 0.0) == {"quota": "sessions_t", "limited": True, "limit": 2,
                                   "allowed": 1, "refused": 1}
    assert q.view("other", 0.0)["allowed"] == 0


def test_the_least_recently_seen_tenant_is_forgotten() -> None:
    q = CountQuota("forget_t", 1, max_tenants=2)
    q.record("x", True)
    q.record("y", True)
    q.record("x", True)
    q.record("z", False)  # y goes
    assert q.tally("y") == (0, 0) and q.tally("x") == (2, 0)
    assert ("y", "forget_t", "allowed") not in {
        tuple(s.labels.values()) for m in QUOTA_DECISIONS.collect() for s in m.samples}
