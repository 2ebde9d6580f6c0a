"""Queries per second per tenant on a real worker over Kafka: a tenant flooding
queries gets ``over_quota`` error replies at once — over its rate quota, or shed
beyond its share of the worker's read-ahead — while another tenant's queries
asked meanwhile are all answered; the decisions show on ``/metrics`` and
``/stats/quotas``."""

from __future__ import annotations

import asyncio
import json
import re
import time

import httpx
import pytest

from streams.client import MemoryClient
from streams.stats.access import new_token, token_hash
from streams.wire.query import MemoryReply
from tests.integration.conftest import Stack
from tests.support.services import KAFKA_BOOTSTRAP
from tests.support.worker import eventually

pytestmark = pytest.mark.alone  # its quotas are rates, which the machine's pace moves

TOKEN = new_token()
LOUD_RATE, LOUD_BURST, FLOOD = 5, 5, 200
OVER = "over the queries quota of tenant 'loud' (5 a second, 5 at once): retry in "
SHED = "the requests of tenant 'loud' exceed what this worker can take now"


def decided(metrics: str, tenant: str, decision: str) -> float:
    found = re.search(rf'memstream_quota_decisions_total{{decision="{decision}",'
                      rf'quota="queries",tenant="{tenant}"}} (\S+)', metrics)
    return float(found.group(1)) if found else 0.0


def client(stack: Stack) -> MemoryClient:
    return MemoryClient(KAFKA_BOOTSTRAP, request_topic=stack.topics["queries"],
                        reply_topic=f"{stack.name}.replies", timeout_s=30)


async def test_a_flooding_tenant_is_refused_and_the_other_answered(stack: Stack) -> None:
    worker = stack.worker(
        MEMSTREAM_QUOTAS__TENANT_OVERRIDES=json.dumps(
            {"loud": {"queries_per_s": LOUD_RATE, "queries_burst": LOUD_BURST}}),
        MEMSTREAM_WEB__STATS_TOKENS=json.dumps([{"sha256": token_hash(TOKEN),
                                                 "tenants": ["*"]}])).start()
    ask = {"user_id": "u1", "agent_id": "a1", "message": "what do you know", "timeout_ms": 20_000}

    async with client(stack) as memory:
        async def ready() -> bool:
            reply = await memory.query(tenant_id="calm", **ask)
            return reply.error is None
        await eventually(ready, 90, "the worker answering queries")

        async def calm() -> list[MemoryReply]:
            replies = []
            for _ in range(30):
                replies.append(await memory.query(tenant_id="calm", **ask))
                await asyncio.sleep(0.05)
            return replies

        began = time.monotonic()
        calm_task = asyncio.ensure_future(calm())
        loud = await asyncio.gather(*(memory.query(tenant_id="loud", **ask)
                                      for _ in range(FLOOD)))
        loud_s = time.monotonic() - began
        calm_replies = await calm_task

    assert [r.error for r in calm_replies] == [None] * 30
    codes = [r.error.code if r.error else None for r in loud]
    answered = codes.count(None)
    assert set(codes) <= {None, "over_quota"}
    assert LOUD_BURST <= answered <= LOUD_BURST + LOUD_RATE * (loud_s + 1), (answered, loud_s)
    assert codes.count("over_quota") == FLOOD - answered
    refusals = [r for r in loud if r.error is not None]
    over = [r for r in refusals if r.error and r.error.message.startswith(OVER)]
    shed = [r for r in refusals if r.error and r.error.message.startswith(SHED)]
    assert over and len(over) + len(shed) == len(refusals)
    for refusal in refusals:  # no engine work: nothing searched, no window read
        assert refusal.tenant_id == "loud" and refusal.memories == []
        assert refusal.long_term.provider is None and refusal.short_term is None
    assert all(r.long_term.provider is not None for r in loud if r.error is None)

    port = worker.env["MEMSTREAM_WEB__PORT"]
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10,
                                 headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        metrics = (await http.get("/metrics")).text
        assert decided(metrics, "loud", "refused") == len(over)
        assert decided(metrics, "loud", "shed") == len(shed)
        assert 'memstream_quota_decisions_total{decision="refused",quota="queries",' \
               'tenant="calm"}' not in metrics
        assert 'memstream_quota_decisions_total{decision="shed",quota="queries",' \
               'tenant="calm"}' not in metrics
        body = (await http.get("/stats/quotas", params={"tenant": "loud"})).json()
        by_name = {q["quota"]: q for q in body["quotas"]}
        assert sorted(by_name) == ["cube_memories", "erasures", "queries",
                                   "sessions_consolidating"]
        queries = by_name["queries"]
        assert (queries["quota"], queries["rate"], queries["burst"]) == ("queries", 5, 5)
        assert (queries["allowed"], queries["refused"]) == (answered, FLOOD - answered)
        calm_stats = (await http.get("/stats/quotas", params={"tenant": "calm"})).json()
        calm_stats = next(q for q in calm_stats["quotas"] if q["quota"] == "queries")
        assert calm_stats["refused"] == 0 and calm_stats["allowed"] >= 31
        assert calm_stats["rate"] == 100
