"""A model call is a span with the GenAI semantic conventions' attributes."""

from __future__ import annotations

import pytest

from streams.memory.provider import ModelCaller
from streams.model_usage.meter import ModelMeter
from tests.support.spans import named, recording


@pytest.mark.parametrize(("purpose", "name", "operation"), [
    ("judge", "chat m1", "chat"),
    ("embed", "embeddings m1", "embeddings"),
])
def test_a_call_is_a_genai_span(purpose: str, name: str, operation: str) -> None:
    meter = ModelMeter()
    with recording() as spans, meter.call(ModelCaller("t1", "a1"), "m1", purpose) as call:
        call.used(120, 7)
    span, = named(spans, name)
    assert span.attributes is not None
    assert dict(span.attributes) == {
        "gen_ai.operation.name": operation, "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "m1", "memstream.purpose": purpose,
        "memstream.tenant_id": "t1", "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 7}


def test_a_failed_call_is_a_failed_span() -> None:
    meter = ModelMeter()
    with recording() as spans, pytest.raises(TimeoutError), \
            meter.call(ModelCaller("t1", "a1"), "m1", "summary"):
        raise TimeoutError
    span, = named(spans, "chat m1")
    assert not span.status.is_ok
