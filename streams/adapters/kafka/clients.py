"""Plain aiokafka clients for the command line, the demo and the benchmarks
(the worker itself produces through Faust)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from streams.adapters.kafka.bootstrap import bootstrap_servers
from streams.settings import KafkaSettings


def producer(k: KafkaSettings, **kwargs: Any) -> AIOKafkaProducer:
    opts: dict[str, Any] = {"acks": "all", "linger_ms": 5, "max_batch_size": 1 << 20}
    opts.update(kwargs)
    return AIOKafkaProducer(bootstrap_servers=bootstrap_servers(k.broker), **opts)


def consumer(k: KafkaSettings, *topics: str, **kwargs: Any) -> AIOKafkaConsumer:
    opts: dict[str, Any] = {"auto_offset_reset": "earliest", "enable_auto_commit": False}
    opts.update(kwargs)
    return AIOKafkaConsumer(*topics, bootstrap_servers=bootstrap_servers(k.broker), **opts)


def chat_key(event: dict[str, Any]) -> bytes:
    return str(event.get("conversation_id", "")).encode()


async def publish_events(
    k: KafkaSettings, events: Iterable[dict[str, Any]], topic: str | None = None
) -> int:
    """Send chat events keyed by conversation; returns how many were delivered."""
    p = producer(k)
    await p.start()
    n = 0
    try:
        futures = []
        for ev in events:
            futures.append(
                await p.send(topic or k.chat_topic, json.dumps(ev).encode(), key=chat_key(ev))
            )
            n += 1
        for f in futures:
            await f
    finally:
        await p.stop()
    return n


async def partitions(k: KafkaSettings, topic: str) -> list[int]:
    """The partition numbers of ``topic`` ([] when it does not exist). A plain
    consumer knows the partitions of the topics it subscribed to only."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers(k.broker))
    await admin.start()
    try:
        described = await admin.describe_topics([topic])
    finally:
        await admin.close()
    for t in described:
        if t.get("error_code", 0) == 0 and t.get("partitions"):
            return sorted(int(p["partition"]) for p in t["partitions"])
    return []
