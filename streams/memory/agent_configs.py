"""Agent configuration lookups: the compacted ``memory.agent-config`` topic as a
mapping, whether it is held by the worker's Faust global table or read by a
command-line tool.

Keys are ``"{tenant_id}/{agent_id}"`` (UTF-8), values the JSON documents
:func:`streams.memory.rules.routing.parse_agent_config` reads (``None`` for a
tombstone). A value that cannot be read counts as no configuration, which
routes to the built-in provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from streams.memory.rules.routing import AgentConfig, agent_config_key, parse_agent_config


class AgentConfigs(Protocol):
    def get(self, tenant_id: str, agent_id: str) -> AgentConfig | None:
        """The agent's configuration; None when unknown or unreadable."""
        ...


class TableAgentConfigs:
    """Over a table-like mapping of raw keys to raw values (the Faust GlobalTable).

    Faust may hand the keys back as bytes or as text depending on how the
    changelog was decoded, so both are tried.
    """

    def __init__(self, table: Any) -> None:
        self._table = table

    def raw(self, tenant_id: str, agent_id: str) -> bytes | str | None:
        key = agent_config_key(tenant_id, agent_id)
        value = self._table.get(key.encode())
        if value is None:
            value = self._table.get(key)
        return value  # type: ignore[no-any-return]

    def get(self, tenant_id: str, agent_id: str) -> AgentConfig | None:
        try:
            raw = self.raw(tenant_id, agent_id)
        except ValueError:  # an id that can never have a configuration
            return None
        return parse_agent_config(raw) if raw is not None else None


class StaticAgentConfigs:
    """A fixed mapping ``(tenant_id, agent_id) -> document`` (tests, benchmarks)."""

    def __init__(self, docs: Mapping[tuple[str, str], bytes | str | dict[str, Any]]
                 | None = None) -> None:
        self.docs = dict(docs or {})

    def get(self, tenant_id: str, agent_id: str) -> AgentConfig | None:
        raw = self.docs.get((tenant_id, agent_id))
        return parse_agent_config(raw) if raw is not None else None
