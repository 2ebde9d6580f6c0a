"""The configured long-term memory providers and chat models, by route name.

Routing (:func:`streams.memory.rules.routing.route`) names a provider; the registry
hands out the one configured under that name. There is no fallback: an agent
routed to MemOS when no MemOS is configured gets
:class:`ProviderNotConfigured` (a permanent error, so the session end is
dead-lettered and can be replayed once MemOS is configured), never the
built-in provider in its place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from streams.memory.provider import ChatCompleter, MemoryProvider, PermanentProviderError


class ProviderNotConfigured(PermanentProviderError):
    """The agent is routed to a provider this deployment has no URL for."""


@dataclass(frozen=True)
class ProviderHandle:
    """A provider and what consolidation may assume about it.

    ``atomic_batch``: ``add`` of several memories stores all or none (one
    database transaction), so one call may carry a whole cube's batch.
    ``episodes``: consolidated messages are also kept as episodic memories.
    ``idempotent_add``: adding a memory already stored (same text and source
    events) returns the stored id instead of storing it twice.
    """

    route: str
    provider: MemoryProvider
    atomic_batch: bool = False
    episodes: bool = False
    idempotent_add: bool = False


class ProviderRegistry:
    def __init__(self, handles: dict[str, ProviderHandle]) -> None:
        self._handles = dict(handles)

    def get(self, route: str) -> ProviderHandle:
        handle = self._handles.get(route)
        if handle is None:
            raise ProviderNotConfigured(
                f"agent routed to {route!r}, which is not configured here",
                provider=route, operation="route")
        return handle

    def configured(self) -> list[str]:
        return sorted(self._handles)


ModelBuilder = Callable[[str], ChatCompleter]
"""Builds the chat model of a name (the composition root supplies the adapter's)."""


class ModelFactory:
    """Chat models by name over one endpoint, created once each by ``build``."""

    def __init__(self, build: ModelBuilder | None, default_model: str | None,
                 *, use_agent_model: bool = False) -> None:
        self._build = build
        self.default_model = default_model
        self.use_agent_model = use_agent_model
        self._models: dict[str, ChatCompleter] = {}

    @property
    def configured(self) -> bool:
        return self._build is not None and self.default_model is not None

    def for_agent(self, bound_model: str | None) -> ChatCompleter | None:
        """The model to consolidate with: none without an endpoint; the agent's
        bound model when ``use_agent_model`` and it has one; else the default."""
        if self._build is None:
            return None
        name = bound_model if self.use_agent_model and bound_model else self.default_model
        if not name:
            return None
        if name not in self._models:
            self._models[name] = self._build(name)
        return self._models[name]
