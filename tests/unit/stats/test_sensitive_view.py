"""``GET /stats/sensitive`` answers from the worker's counts of sensitive content,
without the database, as docs/stats-api.yaml describes it; a tenant sees only its own."""

from __future__ import annotations

from typing import Any

from streams.consolidation.rules.sensitive.kinds import Kind
from streams.consolidation.rules.sensitive.policy import Action
from streams.consolidation.sensitive_counts import SensitiveCounts
from streams.stats.service import StatsService
from tests.support.stats_api import check_answer


async def _no_engine() -> Any:
    raise AssertionError("the sensitive counts are answered without the database")


async def test_a_tenants_counts_per_kind_and_action() -> None:
    counts = SensitiveCounts(clock=lambda: 0.0)
    counts.add("acme", Kind.EMAIL, Action.MASK, 2)
    counts.add("acme", Kind.SECRET, Action.DROP)
    counts.add("beta", Kind.CARD, Action.MASK, 5)
    service = StatsService(_no_engine, sensitive=counts)
    answer = await service.answer("/stats/sensitive", {"tenant": ["acme"]})
    assert answer.status == 200, answer.body
    check_answer("/stats/sensitive", 200, answer.body)
    body = answer.body
    assert body["tenant"] == "acme" and body["since"] == "1970-01-01T00:00:00Z"
    assert body["kinds"]["email"] == {"keep": 0, "mask": 2, "drop": 0}
    assert body["kinds"]["secret"] == {"keep": 0, "mask": 0, "drop": 1}
    assert body["kinds"]["card"] == {"keep": 0, "mask": 0, "drop": 0}  # beta's
    assert body["total"] == {"keep": 0, "mask": 2, "drop": 1}


async def test_without_counts_every_tenant_has_zeros_and_a_tenant_is_required() -> None:
    service = StatsService(_no_engine, clock=lambda: 0.0)
    answer = await service.answer("/stats/sensitive", {"tenant": ["acme"]})
    assert answer.status == 200
    check_answer("/stats/sensitive", 200, answer.body)
    assert answer.body["total"] == {"keep": 0, "mask": 0, "drop": 0}
    refused = await service.answer("/stats/sensitive", {})
    assert refused.status == 400
    check_answer("/stats/sensitive", 400, refused.body)
