"""Which provider an agent's memories go to, whether long memory applies, and how
an agent configuration and its key are read."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from streams.memory.rules.routing import (
    AgentConfig,
    agent_config_key,
    long_memory_enabled,
    parse_agent_config,
    route,
    split_agent_config_key,
)


@pytest.mark.parametrize(("config", "expected"), [
    (None, "mysql"),
    (AgentConfig(), "mysql"),
    (AgentConfig(long_memory_provider="MYSQL"), "mysql"),
    (AgentConfig(long_memory_provider="MEMOS"), "memos"),
    (AgentConfig(long_memory_provider="MEM0"), "mem0"),
])
def test_an_agent_is_routed_to_its_provider_and_otherwise_to_the_builtin_one(
        config: AgentConfig | None, expected: str) -> None:
    assert route(config) == expected


def test_long_memory_needs_the_switch_and_a_model_and_unknown_agents_take_the_default(
        ) -> None:
    assert long_memory_enabled(AgentConfig(open_long_memory=True, model="m"),
                               default_for_unknown=False)
    assert not long_memory_enabled(AgentConfig(open_long_memory=True),
                                   default_for_unknown=True)
    assert not long_memory_enabled(AgentConfig(model="m"), default_for_unknown=True)
    assert long_memory_enabled(None, default_for_unknown=True)
    assert not long_memory_enabled(None, default_for_unknown=False)


def test_a_configuration_is_read_in_either_spelling_whatever_the_case_of_the_provider(
        ) -> None:
    ours = parse_agent_config(b'{"long_memory_provider": "memos", "open_long_memory": true, '
                              b'"model": " gpt ", "updated_at": "2026-11-30T08:00:00"}')
    theirs = parse_agent_config({"longMemoryProvider": "MemOS", "openLongMemory": 1,
                                 "boundModel": "gpt", "updatedAt": "2026-11-30T08:00:00Z"})
    want = AgentConfig("MEMOS", True, "gpt", datetime(2026, 11, 30, 8, tzinfo=UTC))
    assert ours == theirs == want
    assert parse_agent_config(want.to_dict()) == want
    assert parse_agent_config("{}") == AgentConfig()


@pytest.mark.parametrize("raw", [
    None, b"{not json", b"\xff", "[]", '"text"',
    {"long_memory_provider": "REDIS"},
    {"long_memory_provider": 3},
    {"open_long_memory": "yes"},
    {"open_long_memory": 2},
    {"model": 7},
    {"updated_at": 1700000000},
    {"updated_at": "yesterday"},
])
def test_an_unreadable_configuration_is_none_and_so_routed_as_unknown(raw: Any) -> None:
    assert parse_agent_config(raw) is None
    assert route(parse_agent_config(raw)) == "mysql"


def test_a_new_agent_goes_to_memos_with_long_memory_off() -> None:
    new = AgentConfig.for_new_agent()
    assert (route(new), long_memory_enabled(new, default_for_unknown=True)) == ("memos", False)


def test_a_key_is_the_tenant_and_the_agent_which_may_itself_hold_a_slash() -> None:
    assert agent_config_key("t1", "a/b") == "t1/a/b"
    assert split_agent_config_key(b"t1/a/b") == ("t1", "a/b")
    for tenant, agent in (("bad/tenant", "a"), ("", "a"), ("t1", "")):
        with pytest.raises(ValueError):
            agent_config_key(tenant, agent)
    for key in ("t1", "t1/", "/a", "bad tenant/a"):
        with pytest.raises(ValueError):
            split_agent_config_key(key)


@pytest.mark.parametrize(("raw", "expected"), [
    ({}, ()),
    ({"sensitive": None}, ()),
    ({"sensitive": {}}, ()),
    ({"sensitive": {"Email": " DROP ", "card": "keep"}}, (("card", "keep"), ("email", "drop"))),
    ({"sensitive": {"anything": "goes"}}, (("anything", "goes"),)),  # checked where applied
])
def test_an_agents_sensitive_policy_is_read_as_given(raw: dict[str, Any],
                                                     expected: tuple[tuple[str, str], ...]) -> None:
    config = parse_agent_config(raw)
    assert config is not None and config.sensitive == expected
    again = parse_agent_config(config.to_dict())
    assert again is not None and again.sensitive == expected


@pytest.mark.parametrize(("value", "kept"), [
    (["email", "drop"], ()),
    ("drop", ()),
    ({"email": 1}, ()),
    ({"email": None}, ()),
    ({"email": "drop", "card": 1}, (("email", "drop"),)),
    ({"email": {"x": 1}, "Name": "MASK", "ip": ["drop"]}, (("name", "mask"),)),
])
def test_entries_not_of_strings_are_left_out_and_the_rest_of_the_config_kept(
        value: Any, kept: tuple[tuple[str, str], ...]) -> None:
    config = parse_agent_config({"long_memory_provider": "MEM0", "open_long_memory": True,
                                 "model": "m", "sensitive": value})
    assert config is not None
    assert route(config) == "mem0" and long_memory_enabled(config, default_for_unknown=False)
    assert config.sensitive == kept


def test_the_sensitive_entries_kept_are_capped_in_number_and_length() -> None:
    many = {f"kind{i:03}": "drop" for i in range(1000)}
    config = parse_agent_config({"sensitive": {"email": "drop", **many}})
    assert config is not None and len(config.sensitive) == 32
    assert ("email", "drop") in config.sensitive  # the first entries are the ones kept
    config = parse_agent_config({"sensitive": {"e" * 10_000: "d" * 10_000}})
    assert config is not None and config.sensitive == (("e" * 32, "d" * 32),)
