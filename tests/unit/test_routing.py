"""Agent configuration parsing, provider routing and the long-memory switch."""

from __future__ import annotations

import inspect
import json
from datetime import UTC, datetime

import pytest

from streams.memory.rules.routing import (
    AgentConfig,
    agent_config_key,
    long_memory_enabled,
    parse_agent_config,
    route,
    split_agent_config_key,
)

NOW = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("config", "provider"),
    [
        pytest.param(None, "mysql", id="unknown-agent"),
        pytest.param(parse_agent_config(b"{not json"), "mysql", id="unreadable"),
        pytest.param(AgentConfig(), "mysql", id="provider-unset"),
        pytest.param(AgentConfig("MYSQL"), "mysql", id="mysql"),
        pytest.param(AgentConfig("MEMOS"), "memos", id="memos"),
        pytest.param(AgentConfig("MEM0"), "mem0", id="mem0"),
        pytest.param(AgentConfig("MEMOS", open_long_memory=True, model="m"), "memos",
                     id="memos-enabled"),
        pytest.param(AgentConfig.for_new_agent(NOW), "memos", id="new-agent"),
    ],
)
def test_route(config: AgentConfig | None, provider: str) -> None:
    assert route(config) == provider


def test_route_offers_no_fallback() -> None:
    assert list(inspect.signature(route).parameters) == ["config"]


def test_new_agent_defaults() -> None:
    config = AgentConfig.for_new_agent(NOW)
    assert config == AgentConfig("MEMOS", open_long_memory=False, model=None, updated_at=NOW)
    assert long_memory_enabled(config, default_for_unknown=True) is False


DOC = {"long_memory_provider": "MEMOS", "open_long_memory": True, "model": "gpt-4o-mini",
       "updated_at": "2024-05-01T10:00:00+00:00"}
FULL = AgentConfig("MEMOS", True, "gpt-4o-mini", NOW)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(DOC, FULL, id="dict"),
        pytest.param(json.dumps(DOC), FULL, id="str"),
        pytest.param(json.dumps(DOC).encode(), FULL, id="bytes"),
        pytest.param({**DOC, "long_memory_provider": "memos"}, FULL, id="lowercase-provider"),
        pytest.param({**DOC, "long_memory_provider": " Mem0 "}, AgentConfig("MEM0", True,
                     "gpt-4o-mini", NOW), id="mixed-case-provider"),
        pytest.param({**DOC, "updated_at": "2024-05-01T10:00:00Z"}, FULL, id="zulu-time"),
        pytest.param({**DOC, "updated_at": "2024-05-01T10:00:00"}, FULL, id="naive-time-is-utc"),
        pytest.param({"longMemoryProvider": "MEMOS", "openLongMemory": 1, "model": "gpt-4o-mini",
                      "updatedAt": "2024-05-01T10:00:00Z"}, FULL, id="camel-case-and-tinyint"),
        pytest.param({}, AgentConfig(), id="empty-object-defaults"),
        pytest.param({"long_memory_provider": None, "model": ""}, AgentConfig(), id="nulls"),
        pytest.param({"long_memory_provider": ""}, AgentConfig(), id="empty-provider"),
        pytest.param({**DOC, "extra": [1, 2]}, FULL, id="extra-fields-ignored"),
        pytest.param(None, None, id="tombstone"),
        pytest.param(b"{not json", None, id="bad-json"),
        pytest.param(b"\xff\xfe", None, id="not-utf8"),
        pytest.param("[1, 2]", None, id="not-an-object"),
        pytest.param({**DOC, "long_memory_provider": "PINECONE"}, None, id="unknown-provider"),
        pytest.param({**DOC, "long_memory_provider": 3}, None, id="provider-not-a-string"),
        pytest.param({**DOC, "open_long_memory": "yes"}, None, id="flag-not-a-boolean"),
        pytest.param({**DOC, "open_long_memory": 2}, None, id="flag-out-of-range"),
        pytest.param({**DOC, "model": 5}, None, id="model-not-a-string"),
        pytest.param({**DOC, "updated_at": 1714557600}, None, id="time-not-a-string"),
        pytest.param({**DOC, "updated_at": "yesterday"}, None, id="time-not-iso"),
    ],
)
def test_parse_agent_config(raw: object, expected: AgentConfig | None) -> None:
    assert parse_agent_config(raw) == expected  # type: ignore[arg-type]


def test_to_dict_round_trips() -> None:
    assert parse_agent_config(json.dumps(FULL.to_dict())) == FULL
    assert parse_agent_config(AgentConfig.for_new_agent().to_dict()) == AgentConfig.for_new_agent()


@pytest.mark.parametrize(
    ("config", "default", "enabled"),
    [
        pytest.param(None, True, True, id="no-config-default-on"),
        pytest.param(None, False, False, id="no-config-default-off"),
        pytest.param(AgentConfig("MEMOS", True, "m"), False, True, id="on-with-model"),
        pytest.param(AgentConfig("MEMOS", False, "m"), True, False, id="switched-off"),
        pytest.param(AgentConfig("MEMOS", True, None), True, False, id="no-model-bound"),
        pytest.param(AgentConfig(None, True, "m"), False, True, id="mysql-by-default"),
        pytest.param(AgentConfig(), True, False, id="empty-config-is-off"),
    ],
)
def test_long_memory_enabled(config: AgentConfig | None, default: bool, enabled: bool) -> None:
    assert long_memory_enabled(config, default_for_unknown=default) is enabled


@pytest.mark.parametrize(
    ("tenant", "agent", "key"),
    [
        ("acme", "support-bot", "acme/support-bot"),
        ("t.1_x-y", "a", "t.1_x-y/a"),
        ("acme", "team/bot", "acme/team/bot"),
    ],
)
def test_agent_config_key_round_trip(tenant: str, agent: str, key: str) -> None:
    assert agent_config_key(tenant, agent) == key
    assert split_agent_config_key(key) == (tenant, agent)
    assert split_agent_config_key(key.encode()) == (tenant, agent)


@pytest.mark.parametrize(
    ("tenant", "agent"),
    [("", "a"), ("-acme", "a"), ("ac/me", "a"), ("x" * 65, "a"), ("acme", "")],
)
def test_agent_config_key_rejects_bad_ids(tenant: str, agent: str) -> None:
    with pytest.raises(ValueError):
        agent_config_key(tenant, agent)


@pytest.mark.parametrize("key", ["acme", "acme/", "/bot", "-acme/bot", ""])
def test_split_agent_config_key_rejects_bad_keys(key: str) -> None:
    with pytest.raises(ValueError):
        split_agent_config_key(key)
