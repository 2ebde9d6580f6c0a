"""Plain aiokafka clients for the command line, the demo and the benchmarks
(the worker itself produces through Faust)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from streams.adapters.kafka.bootstrap import bootstrap_servers
from streams.adapters.kafka.security import KafkaSecurity
from streams.settings import KafkaSettings
from streams.stores import StoreUnavailable


def kafka_security(k: KafkaSettings) -> KafkaSecurity:
    """The Kafka security settings as plain values (secrets revealed here only)."""
    return KafkaSecurity(
        protocol=k.security_protocol, sasl_mechanism=k.sasl_mechanism, username=k.sasl_username,
        password=k.sasl_password.get_secret_value() if k.sasl_password else None,
        cafile=k.ssl_cafile, certfile=k.ssl_certfile, keyfile=k.ssl_keyfile,
        key_password=k.ssl_key_password.get_secret_value() if k.ssl_key_password else None,
        oauth_token_file=k.sasl_oauth_token_file)


def client_options(k: KafkaSettings) -> dict[str, Any]:
    """``bootstrap_servers`` and the security options of every aiokafka client."""
    return {"bootstrap_servers": bootstrap_servers(k.broker),
            **kafka_security(k).client_options()}


def producer(k: KafkaSettings, **kwargs: Any) -> AIOKafkaProducer:
    opts: dict[str, Any] = {"acks": "all", "linger_ms": 5, "max_batch_size": 1 << 20}
    opts.update(kwargs)
    return AIOKafkaProducer(**client_options(k), **opts)


def consumer(k: KafkaSettings, *topics: str, **kwargs: Any) -> AIOKafkaConsumer:
    opts: dict[str, Any] = {"auto_offset_reset": "earliest", "enable_auto_commit": False}
    opts.update(kwargs)
    return AIOKafkaConsumer(*topics, **client_options(k), **opts)


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
    admin = AIOKafkaAdminClient(**client_options(k))
    try:
        await admin.start()
        described = await admin.describe_topics([topic])
    finally:
        await admin.close()
    for t in described:
        if t.get("error_code", 0) == 0 and t.get("partitions"):
            return sorted(int(p["partition"]) for p in t["partitions"])
    return []


async def records_since(k: KafkaSettings, topic: str, partition: int,
                        since_ms: int) -> AsyncGenerator[Any, None]:
    """The records of one partition from the first one timestamped ``since_ms``
    or later up to the partition's end when the read began (wrap in ``contextlib.aclosing`` to stop
    early: the consumer is stopped when the iterator is closed)."""
    c = consumer(k)
    try:
        await c.start()
        async with contextlib.aclosing(read_since(c, topic, partition, since_ms)) as records:
            async for r in records:
                yield r
    finally:
        await c.stop()


async def read_since(c: AIOKafkaConsumer, topic: str, partition: int,
                     since_ms: int) -> AsyncGenerator[Any, None]:
    """:func:`records_since` through a started consumer with no group, which is assigned
    that partition alone (whatever it was assigned before)."""
    tp = TopicPartition(topic, partition)
    c.assign([tp])
    found_at = (await c.offsets_for_times({tp: max(since_ms, 0)}))[tp]
    if found_at is None:
        return
    c.seek(tp, found_at.offset)
    end = (await c.end_offsets([tp]))[tp]
    while await c.position(tp) < end:
        for records in (await c.getmany(tp, timeout_ms=1000)).values():
            for r in records:
                if r.offset < end:
                    yield r


async def end_offsets(k: KafkaSettings, topic: str) -> dict[int, int]:
    """Each partition of ``topic`` and the offset the next record will get ({} when
    the topic does not exist)."""
    parts = await partitions(k, topic)
    if not parts:
        return {}
    c = consumer(k)
    await c.start()
    try:
        ends = await c.end_offsets([TopicPartition(topic, p) for p in parts])
    finally:
        await c.stop()
    return {tp.partition: int(offset) for tp, offset in ends.items()}


async def end_offsets_or_unavailable(k: KafkaSettings, topic: str) -> dict[int, int]:
    """:func:`end_offsets`; a failure of Kafka raises
    :class:`~streams.stores.StoreUnavailable` (the erasure waits it out)."""
    try:
        return await end_offsets(k, topic)
    except KafkaError as exc:
        raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from exc
