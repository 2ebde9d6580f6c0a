"""``GET /stats/model-usage`` answers from the worker's model meter, without the
database, as docs/stats-api.yaml describes it; the meter is built from the settings."""

from __future__ import annotations

from typing import Any

from streams.memory.provider import ModelCaller
from streams.settings import Settings
from streams.stats.service import StatsService
from streams.worker.runtime import model_meter
from tests.support.stats_api import check_answer

NOW = 20 * 86_400.0 + 3_600.0


async def _no_engine() -> Any:
    raise AssertionError("model usage is answered without the database")


async def test_usage_cost_and_budget_of_a_tenant() -> None:
    meter = model_meter(Settings.model_validate({"model_usage": {
        "labelled_tenants": ["acme"], "daily_tokens": 5000,
        "prices": {"m": {"input_per_1k": 1.0, "output_per_1k": 3.0}}}}))
    meter.clock = lambda: NOW
    with meter.call(ModelCaller("acme", "helper"), "m", "judge") as call:
        call.used(1000, 100)
    service = StatsService(_no_engine, model_usage=meter, clock=lambda: NOW)
    answer = await service.answer("/stats/model-usage", {"tenant": ["acme"], "hours": ["2"]})
    assert answer.status == 200, answer.body
    check_answer("/stats/model-usage", 200, answer.body)
    body = answer.body
    assert [i["tokens"] for i in body["items"]] == [0, 1100]
    assert body["top_agents"][0]["agent_id"] == "helper"
    assert body["total"]["cost"] == 1.3
    assert body["today"] == {"tokens": 1100, "budget": 5000}
    refused = await service.answer("/stats/model-usage", {"tenant": ["acme"], "hours": ["0"]})
    assert refused.status == 400
