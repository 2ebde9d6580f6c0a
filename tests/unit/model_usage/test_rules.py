"""The pure rules of model usage: bounded labels, prices, budgets, days."""

from __future__ import annotations

import pytest

from streams.model_usage.rules import (
    LabelPolicy,
    Price,
    budget_of,
    chat_prompt_tokens,
    cost_of,
    day_of,
    hour_of,
    over_budget,
)

POLICY = LabelPolicy.of(["acme", "globex"], ["helper"])


@pytest.mark.parametrize(("tenant", "agent", "labels"), [
    ("acme", "helper", ("acme", "helper")),
    ("acme", "writer", ("acme", "other")),  # an agent the settings do not name
    ("initech", "helper", ("other", "other")),  # a named agent of an unnamed tenant
    ("", "", ("other", "other")),  # nobody's call
    ("ACME", "helper", ("other", "other")),  # ids compare exactly
])
def test_only_named_tenants_and_their_named_agents_get_their_own_labels(
        tenant: str, agent: str, labels: tuple[str, str]) -> None:
    assert POLICY.labels(tenant, agent) == labels
    assert POLICY.tenant(tenant) == labels[0]


def test_no_names_means_one_series_per_model_and_purpose() -> None:
    assert {LabelPolicy().labels(f"t{i}", f"a{i}") for i in range(100)} == {("other", "other")}


PRICES = {"big": Price(input_per_1k=2.5, output_per_1k=10.0), "free": Price(0.0, 0.0)}


@pytest.mark.parametrize(("model", "tokens_in", "tokens_out", "cost"), [
    ("big", 1000, 0, 2.5),
    ("big", 0, 1000, 10.0),
    ("big", 400, 100, 2.0),  # 0.4 * 2.5 + 0.1 * 10
    ("free", 5000, 5000, 0.0),
    ("unlisted", 5000, 5000, 0.0),
])
def test_cost_by_the_price_table(model: str, tokens_in: int, tokens_out: int,
                                 cost: float) -> None:
    assert cost_of(PRICES, model, tokens_in, tokens_out) == pytest.approx(cost)


@pytest.mark.parametrize(("tenant", "spent", "over"), [
    ("acme", 999, False),
    ("acme", 1000, True),  # the budget is spent once reached
    ("globex", 10**9, False),  # 0: no budget
    ("initech", 499, False),  # the default
    ("initech", 500, True),
])
def test_budgets_per_tenant(tenant: str, spent: int, over: bool) -> None:
    budget = budget_of(tenant, 500, {"acme": 1000, "globex": 0})
    assert over_budget(spent, budget) is over


def test_days_and_hours_are_utc() -> None:
    assert (day_of(86_399.9), day_of(86_400.0)) == (0, 1)
    assert (hour_of(3_599.0), hour_of(3_600.0)) == (0, 1)


@pytest.mark.parametrize(("messages", "tokens"), [
    ([], 3),
    ([(1, 5)], 3 + 1 + 5 + 3),
    ([(1, 5), (1, 0)], (3 + 1 + 5) + (3 + 1 + 0) + 3),
])
def test_counted_chat_prompts_frame_each_message_and_the_reply(
        messages: list[tuple[int, int]], tokens: int) -> None:
    assert chat_prompt_tokens(messages) == tokens
