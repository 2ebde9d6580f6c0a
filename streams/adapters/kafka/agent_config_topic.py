"""Reading and writing the compacted ``memory.agent-config`` topic from outside
the worker (the command line), with plain aiokafka clients.

The worker holds the same topic in a Faust global table
(:data:`streams.worker.tables.agent_configs`), so a value produced here reaches every
worker without any other step.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

from aiokafka import TopicPartition

from streams.adapters.kafka.clients import consumer, partitions, producer
from streams.memory.rules.routing import (
    AgentConfig,
    ProviderName,
    agent_config_key,
    long_memory_enabled,
    parse_agent_config,
    route,
)
from streams.settings import KafkaSettings


async def read_all(k: KafkaSettings, *, timeout_s: float = 15.0) -> dict[str, bytes | None]:
    """Every key's newest value (None for a tombstone), read to the current end."""
    tps = [TopicPartition(k.agent_config_topic, p)
           for p in await partitions(k, k.agent_config_topic)]
    if not tps:
        return {}
    c = consumer(k)
    await c.start()
    try:
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        ends = await c.end_offsets(tps)
        out: dict[str, bytes | None] = {}

        async def behind() -> bool:
            for tp in tps:
                if await c.position(tp) < ends[tp]:
                    return True
            return False

        deadline = time.monotonic() + timeout_s
        while await behind():
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not read {k.agent_config_topic} to its end")
            batch = await c.getmany(*tps, timeout_ms=1000)
            for records in batch.values():
                for r in records:
                    if r.key is not None:
                        out[r.key.decode("utf-8", "replace")] = r.value
        return out
    finally:
        await c.stop()


async def write(k: KafkaSettings, tenant_id: str, agent_id: str,
                config: AgentConfig | None) -> None:
    """Produce the agent's configuration (None: a tombstone that removes it)."""
    key = agent_config_key(tenant_id, agent_id).encode()
    value = None if config is None else json.dumps(config.to_dict()).encode()
    p = producer(k)
    await p.start()
    try:
        await (await p.send(k.agent_config_topic, value, key=key))
    finally:
        await p.stop()


def merged(current: AgentConfig | None, *, provider: str | None = "",
           open_long_memory: bool | None = None, model: str | None = None,
           now: datetime | None = None,
           sensitive: Mapping[str, str] | None = None) -> AgentConfig:
    """``current`` with the given fields changed (``provider=""``: unchanged,
    ``None``: unset; ``model=""``: unset; ``sensitive``: the whole override replaced,
    ``{}`` clears it)."""
    base = current or AgentConfig()
    return AgentConfig(
        long_memory_provider=(base.long_memory_provider if provider == ""
                              else cast(ProviderName | None, provider)),
        open_long_memory=base.open_long_memory if open_long_memory is None else open_long_memory,
        model=base.model if model is None else (model or None),
        updated_at=now or datetime.now(UTC),
        sensitive=base.sensitive if sensitive is None else tuple(sorted(sensitive.items())),
    )


def describe(tenant_id: str, agent_id: str, raw: bytes | None, *,
             default_long_memory: bool) -> dict[str, Any]:
    """What the worker makes of an agent's value: route and whether long memory is on."""
    config = parse_agent_config(raw) if raw is not None else None
    return {
        "tenant_id": tenant_id,
        "agent_id": agent_id,
        "configured": raw is not None,
        "readable": raw is None or config is not None,
        "config": config.to_dict() if config else None,
        "route": route(config),
        "long_memory": long_memory_enabled(config, default_for_unknown=default_long_memory),
    }
