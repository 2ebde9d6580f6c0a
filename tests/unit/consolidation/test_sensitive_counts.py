"""This worker's counts of sensitive content per tenant, kind and action: what the
screening did, by the tenant's own id, bounded in tenants."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from streams.consolidation.model import PlannedCandidate
from streams.consolidation.rules.sensitive.kinds import Kind
from streams.consolidation.rules.sensitive.policy import DEFAULT_ACTIONS, Action
from streams.consolidation.screening import Screening
from streams.consolidation.sensitive_counts import SensitiveCounts
from streams.memory.model import USER_CUBE, MemoryCandidate
from streams.testing.consolidation import ListedDetector

DEPLOYMENT = {k.value: a.value for k, a in DEFAULT_ACTIONS.items()}
LISTED = {"a@b.io": Kind.EMAIL, "sk-123": Kind.SECRET, "Ann": Kind.NAME}


def planned(text: str) -> PlannedCandidate:
    return PlannedCandidate(USER_CUBE, MemoryCandidate(
        content=text, event_time=datetime(2026, 1, 1, tzinfo=UTC)))


async def test_the_screening_counts_per_tenant_kind_and_action() -> None:
    counts = SensitiveCounts()
    screening = Screening(ListedDetector(LISTED), DEPLOYMENT, counts=counts,
                          tenant_label=lambda tenant_id: "other")  # the metric's label only
    await screening.candidates("acme", [planned("write to a@b.io"),
                                        planned("key sk-123 and a@b.io"),
                                        planned("Ann says hi"), planned("nothing")],
                               screening.deployment)
    await screening.summary("acme", "key sk-123", screening.deployment)  # never dropped
    await screening.candidates("beta", [planned("a@b.io")], screening.policy(
        "beta", "a1", (("email", "drop"),)))
    acme = counts.view("acme")
    assert {k: {a: n for a, n in v.items() if n} for k, v in acme["kinds"].items() if any(
        v.values())} == {"email": {"mask": 1, "drop": 1},  # dropped with the secret
                         "secret": {"drop": 1, "mask": 1}, "name": {"keep": 1}}
    assert acme["total"] == {"keep": 1, "mask": 2, "drop": 2}
    assert counts.count("beta", Kind.EMAIL, Action.DROP) == 1
    assert counts.view("beta")["total"] == {"keep": 0, "mask": 0, "drop": 1}
    assert counts.view("other")["total"] == {"keep": 0, "mask": 0, "drop": 0}


def test_every_kind_and_action_is_shown_zeros_included() -> None:
    view = SensitiveCounts(clock=lambda: 86_400.0).view("nobody")
    assert view["tenant"] == "nobody" and view["since"] == "1970-01-02T00:00:00Z"
    assert set(view["kinds"]) == {k.value for k in Kind}
    assert all(v == {"keep": 0, "mask": 0, "drop": 0} for v in view["kinds"].values())


def test_the_least_recently_counted_tenant_is_forgotten_first() -> None:
    counts = SensitiveCounts(max_tenants=2)
    counts.add("a", Kind.EMAIL, Action.MASK)
    counts.add("b", Kind.CARD, Action.MASK, 3)
    counts.add("a", Kind.EMAIL, Action.MASK)  # a is the most recent now
    counts.add("c", Kind.IBAN, Action.DROP)
    assert counts.tenants == 2
    assert counts.count("a", Kind.EMAIL, Action.MASK) == 2
    assert counts.count("b", Kind.CARD, Action.MASK) == 0  # forgotten
    assert counts.count("c", Kind.IBAN, Action.DROP) == 1
    counts.add("c", Kind.IBAN, Action.DROP, 0)
    counts.add("c", Kind.IBAN, Action.DROP, -4)
    assert counts.count("c", Kind.IBAN, Action.DROP) == 1
    with pytest.raises(ValueError):
        SensitiveCounts(max_tenants=0)
