"""Agent configuration and the choice of long-term memory provider.

Agent configurations arrive on the compacted topic ``memory.agent-config``,
keyed ``"{tenant_id}/{agent_id}"`` (tenant ids cannot contain ``/``). Routing:

==========================================  ==========
configuration                               provider
==========================================  ==========
no configuration (unknown agent)            ``mysql``
unreadable (bad JSON, wrong types, an
unknown provider name)                      ``mysql``
``long_memory_provider`` unset              ``mysql``
``MYSQL`` / ``MEMOS`` / ``MEM0``            ``mysql`` / ``memos`` / ``mem0``
==========================================  ==========

There is deliberately no way to ask for a fallback: a failing MemOS or Mem0 is
retried and dead-lettered, never silently swapped for another provider, whose
memories the agent would then miss.

Long memory is off when the configuration says so (``open_long_memory``) or no
model is bound; for an agent with no configuration the deployment's default
decides.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast, get_args

from streams.clock import aware_utc

ProviderName = Literal["MEMOS", "MEM0", "MYSQL"]
Route = Literal["mysql", "memos", "mem0"]
PROVIDERS: tuple[str, ...] = get_args(ProviderName)

KEY_SEP = "/"
TENANT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

# accepted spellings of each field: memstream's own, then the camelCase of JVM upstreams
_FIELDS: dict[str, tuple[str, ...]] = {
    "long_memory_provider": ("long_memory_provider", "longMemoryProvider"),
    "open_long_memory": ("open_long_memory", "openLongMemory"),
    "model": ("model", "bound_model", "boundModel"),
    "updated_at": ("updated_at", "updatedAt"),
    "sensitive": ("sensitive",),
}


@dataclass(frozen=True)
class AgentConfig:
    long_memory_provider: ProviderName | None = None
    open_long_memory: bool = False
    model: str | None = None
    updated_at: datetime | None = None
    # the agent's sensitive-content policy: (kind, action) pairs overriding the
    # deployment's, as given (checked by consolidation, which knows the kinds)
    sensitive: tuple[tuple[str, str], ...] = ()

    @classmethod
    def for_new_agent(cls, now: datetime | None = None) -> AgentConfig:
        """A new agent's configuration: MemOS, with long memory off until switched on."""
        return cls(long_memory_provider="MEMOS", open_long_memory=False, updated_at=now)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document :func:`parse_agent_config` reads back."""
        return {
            "long_memory_provider": self.long_memory_provider,
            "open_long_memory": self.open_long_memory,
            "model": self.model,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
            **({"sensitive": dict(self.sensitive)} if self.sensitive else {}),
        }


class _Unreadable(ValueError):
    pass


def _field(doc: dict[str, Any], name: str) -> Any:
    return next((doc[k] for k in _FIELDS[name] if k in doc), None)


def _provider(value: Any) -> ProviderName | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or value.strip().upper() not in PROVIDERS:
        raise _Unreadable(f"unknown provider {value!r}")
    return cast(ProviderName, value.strip().upper())


def _flag(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):  # a MySQL TINYINT(1) passed through
        return bool(value)
    raise _Unreadable(f"open_long_memory is {value!r}, not a boolean")


def _model(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise _Unreadable(f"model is {value!r}, not a string")
    return value.strip()


def _time(value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _Unreadable(f"updated_at is {value!r}, not an ISO 8601 string")
    try:
        t = datetime.fromisoformat(value)
    except ValueError as exc:
        raise _Unreadable(str(exc)) from exc
    return aware_utc(t)


_SENSITIVE_ENTRIES = 32  # there are 9 kinds: room for a few misspelt ones, named in a warning
_SENSITIVE_CHARS = 32


def _sensitive(value: Any) -> tuple[tuple[str, str], ...]:
    """The entries of ``sensitive`` whose kind and action are strings (the first
    _SENSITIVE_ENTRIES of them, each cut to _SENSITIVE_CHARS characters); any other
    entry, or a value that is not an object, is left out: it never makes the rest of
    the configuration unreadable. Which kinds and actions are known is checked where
    the policy is applied (``Screening.policy``, which names the others)."""
    if not isinstance(value, dict):
        return ()
    entries = [(k.strip().lower()[:_SENSITIVE_CHARS], v.strip().lower()[:_SENSITIVE_CHARS])
               for k, v in value.items() if isinstance(k, str) and isinstance(v, str)]
    return tuple(sorted(entries[:_SENSITIVE_ENTRIES]))


def parse_agent_config(raw: bytes | str | dict[str, Any] | None) -> AgentConfig | None:
    """The configuration in a topic value, or None when it is absent or unreadable.

    Provider names are matched case-insensitively; missing fields take the
    defaults of :class:`AgentConfig` (no provider, long memory off, no model, the
    deployment's sensitive-content policy). ``sensitive`` is read leniently: the
    entries that are not strings are left out (see :func:`_sensitive`); which kinds
    and actions it names is checked where it is applied.
    """
    if raw is None:
        return None
    try:
        doc = json.loads(raw) if isinstance(raw, bytes | str) else raw
    except ValueError:  # includes UnicodeDecodeError
        return None
    if not isinstance(doc, dict):
        return None
    try:
        return AgentConfig(
            long_memory_provider=_provider(_field(doc, "long_memory_provider")),
            open_long_memory=_flag(_field(doc, "open_long_memory")),
            model=_model(_field(doc, "model")),
            updated_at=_time(_field(doc, "updated_at")),
            sensitive=_sensitive(_field(doc, "sensitive")),
        )
    except _Unreadable:
        return None


_ROUTES: dict[str, Route] = {"MYSQL": "mysql", "MEMOS": "memos", "MEM0": "mem0"}


def route(config: AgentConfig | None) -> Route:
    """The provider for an agent; see the module docstring for the table."""
    if config is None or config.long_memory_provider is None:
        return "mysql"
    return _ROUTES[config.long_memory_provider]


def long_memory_enabled(config: AgentConfig | None, *, default_for_unknown: bool) -> bool:
    if config is None:
        return default_for_unknown
    return config.open_long_memory and config.model is not None


def agent_config_key(tenant_id: str, agent_id: str) -> str:
    if not TENANT_ID.match(tenant_id):
        raise ValueError(f"tenant id {tenant_id!r} does not match {TENANT_ID.pattern}")
    if not agent_id:
        raise ValueError("agent id is empty")
    return f"{tenant_id}{KEY_SEP}{agent_id}"


def split_agent_config_key(key: str | bytes) -> tuple[str, str]:
    """``(tenant_id, agent_id)`` of a key; the agent id may itself contain ``/``."""
    text = key.decode("utf-8") if isinstance(key, bytes) else key
    tenant, sep, agent = text.partition(KEY_SEP)
    if not sep or not agent or not TENANT_ID.match(tenant):
        raise ValueError(f"not an agent-config key: {text!r}")
    return tenant, agent
