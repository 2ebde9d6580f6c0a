"""Creating and checking memstream's topics.

Faust requires a table's source topics and its changelog to have the same
partition count, so every topic memstream consumes must have
``MEMSTREAM_KAFKA__PARTITIONS`` partitions. ``ensure_topics`` creates missing
topics with that count and refuses to start against a mismatch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError

from streams.adapters.kafka.bootstrap import bootstrap_servers
from streams.adapters.kafka.clients import client_options, kafka_security
from streams.adapters.kafka.security import credentials_refusal
from streams.settings import KafkaSettings

log = logging.getLogger(__name__)


class TopicLayoutError(RuntimeError):
    pass


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    config: dict[str, str]


def topic_specs(k: KafkaSettings) -> list[TopicSpec]:
    p = k.partitions
    week = str(7 * 24 * 3600 * 1000)
    return [
        TopicSpec(k.chat_topic, p, {}),
        TopicSpec(k.subagent_topic, p, {}),
        TopicSpec(k.idle_topic, p, {"retention.ms": str(24 * 3600 * 1000)}),
        TopicSpec(k.session_closed_topic, p, {}),
        TopicSpec(k.retry_topic, p, {}),
        TopicSpec(k.dlq_topic, p, {"retention.ms": str(30 * 24 * 3600 * 1000)}),
        TopicSpec(k.queries_topic, p, {"retention.ms": week}),
        # one partition: a global table's changelog (tiny, read whole by every worker)
        TopicSpec(k.agent_config_topic, 1, {"cleanup.policy": "compact"}),
        # one partition: erasures are carried out one after the other; compacted, the
        # newest request per subject stays (its receipt is in the database)
        TopicSpec(k.erasures_topic, 1, {"cleanup.policy": "compact"}),
    ]


# topics whose partitions must equal the table partitions (co-partitioned by conversation)
def copartitioned(k: KafkaSettings) -> set[str]:
    return {k.chat_topic, k.subagent_topic, k.idle_topic, k.session_closed_topic, k.retry_topic}


async def ensure_topics(k: KafkaSettings, *, timeout_s: float = 60.0) -> list[str]:
    """Create missing topics; return the names created. Raises TopicLayoutError on a mismatch."""
    admin = AIOKafkaAdminClient(**client_options(k), request_timeout_ms=15000)
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        try:
            await admin.start()
            break
        except KafkaError as exc:
            # refused credentials or TLS will not heal by waiting: say so, once
            why = await credentials_refusal(bootstrap_servers(k.broker), kafka_security(k))
            if why is not None:
                raise TopicLayoutError(f"Kafka at {k.broker}: {why}") from exc
            if asyncio.get_running_loop().time() > deadline:
                raise TopicLayoutError(f"Kafka at {k.broker} is not reachable: {exc}") from exc
            await asyncio.sleep(1.0)
    created: list[str] = []
    try:
        existing = set(await admin.list_topics())
        specs = topic_specs(k)
        missing = [s for s in specs if s.name not in existing]
        if missing:
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics(
                    [NewTopic(s.name, s.partitions, k.replication_factor, topic_configs=s.config)
                     for s in missing]
                )
            created = [s.name for s in missing]
            log.info("created topics: %s", ", ".join(created))
        want = copartitioned(k)
        described = await admin.describe_topics([s.name for s in specs if s.name in want])
        for t in described:
            n = len(t.get("partitions") or [])
            if n and n != k.partitions:
                raise TopicLayoutError(
                    f"topic {t['topic']!r} has {n} partitions but MEMSTREAM_KAFKA__PARTITIONS is "
                    f"{k.partitions}; they must match (a table and its source topics are "
                    "co-partitioned)"
                )
    finally:
        await admin.close()
    return created
