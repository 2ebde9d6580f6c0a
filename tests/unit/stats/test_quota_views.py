"""``GET /stats/quotas`` shows every quota of the worker for the tenant asked, its
override before the defaults, each row as docs/stats-api.yaml describes it."""

from __future__ import annotations

from typing import Any

from streams.settings import Settings
from streams.stats.service import StatsService
from streams.worker.quotas import process_quotas
from tests.support.stats_api import check_answer


async def _no_engine() -> Any:
    raise AssertionError("the quotas are answered without the database")


def settings() -> Settings:
    return Settings.model_validate({
        "consolidation": {"concurrency": 8, "tenant_share": 0},
        "quotas": {"erasures_per_min": 6, "erasures_burst": 2, "memories_per_cube": 500,
                   "tenant_overrides": {"acme": {"erasures_per_min": 120,
                                                 "memories_per_cube": 0,
                                                 "sessions_consolidating": 3}}}})


async def quotas_of(tenant: str) -> dict[str, dict[str, Any]]:
    service = StatsService(_no_engine, quotas=process_quotas(settings()).views(),
                           clock=lambda: 1000.0)
    answer = await service.answer("/stats/quotas", {"tenant": [tenant]})
    assert answer.status == 200, answer.body
    check_answer("/stats/quotas", 200, answer.body)
    return {q["quota"]: q for q in answer.body["quotas"]}


async def test_every_quota_of_a_tenant_with_its_overrides() -> None:
    acme, other = await quotas_of("acme"), await quotas_of("other")
    assert sorted(acme) == ["cube_memories", "erasures", "queries", "sessions_consolidating"]
    assert (acme["erasures"]["rate"], acme["erasures"]["per_s"]) == (120, 60)
    assert (other["erasures"]["rate"], other["erasures"]["burst"]) == (6, 2)
    assert acme["cube_memories"]["limited"] is False
    assert (other["cube_memories"]["limited"], other["cube_memories"]["limit"]) == (True, 500)
    assert acme["sessions_consolidating"]["limit"] == 3
    assert other["sessions_consolidating"]["limit"] == 4  # tenant_share 0: half the slots
