"""The meter's bounds: labels, hostile counts, retries and failures."""

from __future__ import annotations

import math

import pytest
from prometheus_client import REGISTRY

from streams.adapters.http.openai_compat import MAX_REPORTED_TOKENS, _reported
from streams.memory.provider import ModelCaller
from streams.model_usage.meter import ModelMeter
from streams.model_usage.rules import LabelPolicy, Price


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.mark.parametrize(("value", "taken"), [
    (12, 12), (12.0, 12), (0, 0), (MAX_REPORTED_TOKENS, MAX_REPORTED_TOKENS),
    (-5, None), (math.nan, None), (math.inf, None), (1e300, None), (True, None),
    ("12", None), (None, None), ([1], None),
])
def test_only_a_plausible_usage_count_is_taken(value: object, taken: int | None) -> None:
    assert _reported({"prompt_tokens": value}, "prompt_tokens") == taken


@pytest.mark.parametrize(("models", "model", "label"), [
    (None, "anything", "anything"),          # no list: every model (tests, tools)
    (["gpt-x"], "gpt-x", "gpt-x"),
    (["gpt-x"], "priced", "priced"),         # in the price table
    (["gpt-x"], "an-agent's-own-model", "other"),
])
def test_a_model_has_its_own_label_only_when_configured_or_priced(
        models: list[str] | None, model: str, label: str) -> None:
    meter = ModelMeter(models=models, prices={"priced": Price(1, 1)})
    assert meter.model_label(model) == label


def test_retries_failures_and_a_negative_count_are_metered_without_raising() -> None:
    meter = ModelMeter(labels=LabelPolicy.of(["tm"], ["am"]), models=["mm"])
    caller = ModelCaller("tm", "am")
    labels = {"tenant": "tm", "agent": "am", "model": "mm", "purpose": "judge"}
    retries = sample("memstream_model_retries_total", **labels)
    failures = sample("memstream_model_failures_total", **labels, error="TimeoutError")
    tokens_in = sample("memstream_model_tokens_total", **labels, direction="in")
    with pytest.raises(TimeoutError), meter.call(caller, "mm", "judge") as call:
        call.retried()
        call.retried()
        call.used(-5, -2)
        raise TimeoutError
    assert sample("memstream_model_retries_total", **labels) == retries + 2
    assert sample("memstream_model_failures_total", **labels,
                  error="TimeoutError") == failures + 1
    assert sample("memstream_model_tokens_total", **labels, direction="in") == tokens_in
