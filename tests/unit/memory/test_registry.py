"""Chat models and providers are handed out by name, never substituted."""

from __future__ import annotations

import pytest

from streams.memory.registry import ModelFactory, ProviderNotConfigured, ProviderRegistry
from streams.testing.memory import FakeChatModel


def test_models_and_providers_are_never_substituted() -> None:
    built: list[str] = []

    def build(name: str) -> FakeChatModel:
        built.append(name)
        return FakeChatModel(model=name)

    assert ModelFactory(None, None).for_agent("m") is None
    f = ModelFactory(build, "default")
    assert f.for_agent("agent-model") is f.for_agent(None) and built == ["default"]
    g = ModelFactory(build, "default", use_agent_model=True)
    g.for_agent("agent-model")
    assert built == ["default", "agent-model"]
    with pytest.raises(ProviderNotConfigured):
        ProviderRegistry({}).get("memos")
